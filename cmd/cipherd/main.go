// Command cipherd is the crypto-offload service and its tools.
//
//	cipherd [serve] [flags]              run the service (the default)
//	cipherd speed [flags] [cipher ...]   benchmark, as `openssl speed -evp`
//	cipherd selftest [flags]             known-answer tests and cipher selection
//	cipherd encrypt|decrypt --key NAME   stream stdin to stdout through a server
//	cipherd health                       exit 0 when the server is ready (container HEALTHCHECK)
//	cipherd keyring new|add|rotate|list  make and rotate a shared keyring file
//	cipherd keys migrate                 copy a file keystore or keyring into PostgreSQL
//	cipherd version [-json]              build information
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

type command struct {
	name  string
	short string
	run   func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

var commands = []command{
	{"serve", "run the service (the default command)", runServe},
	{"speed", "measure cipher throughput like `openssl speed -evp`", runSpeed},
	{"selftest", "run the known-answer tests and the quick cipher selection", runSelftest},
	{"version", "print build information", runVersion},
	{"encrypt", "seal standard input to standard output through a server (--key NAME)", runEncrypt},
	{"decrypt", "open a sealed stream from standard input through a server (--key NAME)", runDecrypt},
	{"health", "exit 0 if the server's /readyz answers 200 (container HEALTHCHECK)", runHealth},
	{"keyring", "create, rotate and list a shared keyring file (new, add, rotate, list)", runKeyring},
	{"keys", "copy a file keystore or a keyring into a PostgreSQL keystore (migrate)", runKeys},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches to a subcommand and returns the process exit code:
// 0 success, 1 failure, 2 usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || len(args[0]) > 0 && args[0][0] == '-' && args[0] != "-h" && args[0] != "-help" && args[0] != "--help" {
		return runServe(ctx, args, stdout, stderr) // serve is the default command
	}
	if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "cipherd: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: cipherd <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.short)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'cipherd <command> -h' for a command's flags.")
}
