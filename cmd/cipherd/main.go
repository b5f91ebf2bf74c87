// Command cipherd is the crypto-offload service and its tools.
//
//	cipherd [serve] [flags]              run the service (the default)
//	cipherd speed [flags] [cipher ...]   benchmark, as `openssl speed -evp`
//	cipherd selftest [flags]             known-answer tests and cipher selection
//	cipherd encrypt|decrypt --key NAME   stream a file or stdin through a server (-i, -o);
//	                                     decrypt's key defaults to the header's
//	cipherd health                       exit 0 when the server is ready (container HEALTHCHECK)
//	cipherd keyring new|add|rotate|list  make and rotate a shared keyring file
//	cipherd rootkey init|rotate          the root key: in a PKCS#11 token, rotation
//	cipherd keys list|show|create|…      manage keys through a server (rotate, config, delete)
//	cipherd keys migrate                 copy a file keystore or keyring into PostgreSQL
//	cipherd tokens create|list|revoke    service tokens, through a server
//	cipherd version [-json]              build information (also --version)
//	cipherd help [command]               the commands, or a command's flags
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
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
	{"encrypt", "seal a file or standard input through a server (--key NAME [-i IN] [-o OUT])", runEncrypt},
	{"decrypt", "open a sealed stream through a server ([--key NAME] [-i IN] [-o OUT])", runDecrypt},
	{"health", "exit 0 if the server's /readyz answers 200 (container HEALTHCHECK)", runHealth},
	{"keyring", "create, rotate and list a shared keyring file (new, add, rotate, list)", runKeyring},
	{"rootkey", "generate the root key in a PKCS#11 token, rotate the root key (init, rotate)", runRootkey},
	{"keys", "manage keys through a server (list, show, create, rotate, config, delete); copy a keystore into PostgreSQL (migrate)", runKeys},
	{"tokens", "issue, list and revoke service tokens through a server (create, list, revoke)", runTokens},
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
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help":
			usage(stderr)
			return 0
		case "help":
			if len(args) == 1 {
				usage(stderr)
				return 0
			}
			return run(ctx, []string{args[1], "-h"}, stdout, stderr)
		case "-version", "--version":
			return runVersion(ctx, args[1:], stdout, stderr)
		}
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return runServe(ctx, args, stdout, stderr) // serve is the default command
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
	fmt.Fprintln(w, "Without a command, cipherd serves: 'cipherd -addr :8080' is 'cipherd serve -addr :8080'.")
	fmt.Fprintln(w, "Run 'cipherd help <command>' or 'cipherd <command> -h' for a command's flags,")
	fmt.Fprintln(w, "and 'cipherd --version' for the build.")
}

// errText is err's message for a line that already names the command:
// the client's errors start with "cipherd: ", which after "cipherd
// decrypt: " would say the name twice.
func errText(err error) string {
	s := err.Error()
	for strings.HasPrefix(s, "cipherd: ") {
		s = s[len("cipherd: "):]
	}
	return s
}
