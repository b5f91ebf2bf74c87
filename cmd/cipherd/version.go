package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/cipherd/cipherd/internal/buildinfo"
)

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print as JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	b := buildinfo.Get()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(b); err != nil {
			return 1
		}
		return 0
	}
	fmt.Fprintf(stdout, "cipherd %s %s %s\n", b.Version, b.GoVersion, b.Platform)
	if b.Revision != "" {
		fmt.Fprintf(stdout, "revision: %s %s\n", b.Revision, b.Time)
	}
	if b.Tags != "" {
		fmt.Fprintf(stdout, "tags: %s\n", b.Tags)
	}
	fmt.Fprintf(stdout, "build id: %s\n", b.BuildID)
	return 0
}
