package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/client"
)

// cipherd tokens issues, lists and revokes service tokens through a running
// server (/v1/tokens), as the caller its token names, who needs the
// operation tokens-admin. It talks to the server as encrypt and decrypt do
// (clientFlags). A token reaches standard output once, when it is issued,
// and nothing else ever prints one.

const tokensUsage = `usage:
  cipherd tokens create --name NAME --policy POLICY[,POLICY…] [--ttl DURATION] [-json] [flags]
  cipherd tokens list [-json] [flags]
  cipherd tokens revoke [flags] ID…

create issues a service token that holds the named policies of the server's
configuration (--policy repeated, or names separated by commas) for --ttl (a
Go duration; default 24h, or the server's max_token_ttl if shorter). The
token goes to standard output, this once: the server keeps only its hash.
Its id, name and expiry go to standard error. With -json the whole answer,
token included, goes to standard output as JSON.

list prints the live tokens (id, name, policies, times; never a token) as a
table, or with -json as GET /v1/tokens answers.

revoke deletes the tokens of the given ids (the <id> of cdt_<id>_<secret>):
they are refused from then on.

The caller needs the operation tokens-admin, which the admin has. The server
is --server or CIPHERD_URL; the caller's token is --token, --token-file,
CIPHERD_TOKEN or CIPHERD_TOKEN_FILE, or an mTLS identity's client
certificate is --cert and --key-file, or CIPHERD_CLIENT_CERT and
CIPHERD_CLIENT_KEY.
`

func runTokens(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, tokensUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("tokens "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, tokensUsage)
		fmt.Fprintf(stderr, "\nflags of %s:\n", sub)
		fs.PrintDefaults()
	}
	var cf clientFlags
	cf.register(fs, true)
	var (
		req    api.CreateTokenRequest
		asJSON bool
	)
	switch sub {
	case "create":
		fs.StringVar(&req.Name, "name", "", "a label for people: 1-64 characters of A-Z a-z 0-9 . _ - (required)")
		fs.Var((*policyList)(&req.Policies), "policy", "a `policy` of the server's configuration for the token to hold; repeat it, or separate names with commas (required)")
		fs.StringVar(&req.TTL, "ttl", "", "the token's lifetime, a Go `duration` such as 72h (default 24h, or the server's max_token_ttl if shorter)")
		fs.BoolVar(&asJSON, "json", false, "print the answer, token included, as JSON")
	case "list":
		fs.BoolVar(&asJSON, "json", false, "print the tokens as JSON")
	case "revoke":
	default:
		fmt.Fprintf(stderr, "cipherd tokens: unknown command %q\n\n%s", sub, tokensUsage)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case sub == "create" && (req.Name == "" || len(req.Policies) == 0):
		fmt.Fprintln(stderr, "cipherd tokens create: --name and --policy are required")
		return 2
	case sub == "revoke" && fs.NArg() == 0:
		fmt.Fprintln(stderr, "cipherd tokens revoke: name at least one token id")
		return 2
	case sub != "revoke" && fs.NArg() > 0:
		fmt.Fprintf(stderr, "cipherd tokens %s: unexpected argument %q\n", sub, fs.Arg(0))
		return 2
	}
	c, err := cf.client()
	if err != nil {
		fmt.Fprintf(stderr, "cipherd tokens %s: %s\n", sub, errText(err))
		return 2
	}
	switch sub {
	case "create":
		err = tokensCreate(ctx, c, &req, asJSON, stdout, stderr)
	case "list":
		err = tokensList(ctx, c, asJSON, stdout)
	case "revoke":
		failed := 0
		for i, id := range fs.Args() {
			if err := c.RevokeToken(ctx, id); err != nil {
				// An argument the client refused to send is not an id and
				// may be a token: it is named by its place, never printed.
				what := id
				if ce := (*client.Error)(nil); errors.As(err, &ce) && ce.Status == 0 {
					what = fmt.Sprintf("argument %d", i+1)
				}
				fmt.Fprintf(stderr, "cipherd tokens revoke %s: %s\n", what, errText(err))
				failed++
				continue
			}
			fmt.Fprintf(stdout, "revoked %s\n", id)
		}
		if failed > 0 {
			return 1
		}
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "cipherd tokens %s: %s\n", sub, errText(err))
		return 1
	}
	return 0
}

// tokensCreate issues a token and prints it, the one time it can be.
func tokensCreate(ctx context.Context, c *client.Client, req *api.CreateTokenRequest, asJSON bool, stdout, stderr io.Writer) error {
	tok, err := c.CreateToken(ctx, *req)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(stdout, tok)
	}
	// The token alone on standard output, so that TOKEN=$(cipherd tokens
	// create …) holds it and nothing else.
	if _, err := fmt.Fprintln(stdout, tok.Secret); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "issued token %s (%s; policies %s), expires %s; it is shown this once\n",
		tok.ID, tok.Name, strings.Join(tok.Policies, ","), tok.ExpiresAt.UTC().Format(time.RFC3339))
	return nil
}

// tokensList prints the live tokens as a table, or as JSON.
func tokensList(ctx context.Context, c *client.Client, asJSON bool, stdout io.Writer) error {
	toks, err := c.ListTokens(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		if toks == nil {
			toks = []api.Token{}
		}
		return writeJSON(stdout, &api.TokenList{Tokens: toks})
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tPOLICIES\tCREATED\tEXPIRES")
	for _, t := range toks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, strings.Join(t.Policies, ","),
			t.CreatedAt.UTC().Format(time.RFC3339), t.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

// policyList is --policy: repeated, each value one name or several
// separated by commas.
type policyList []string

func (p *policyList) String() string { return strings.Join(*p, ",") }

func (p *policyList) Set(v string) error {
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name == "" {
			return errors.New("an empty policy name")
		}
		*p = append(*p, name)
	}
	return nil
}
