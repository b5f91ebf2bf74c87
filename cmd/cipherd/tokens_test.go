package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cipherd/cipherd/api"
)

const tokensTestConfig = `policies:
  - name: app
    allow:
      - ops: [encrypt]
        keys: [default]
  - name: reader
    allow:
      - ops: [keys-read]
        keys: ["*"]
`

// cipherd tokens create, list and revoke against cipherd serve, as a user
// runs them: the token issued works at once and only once printed, the list
// never shows one, and a revoked token is refused.
func TestCLITokens(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "cipherd.yaml")
	if err := os.WriteFile(cfg, []byte(tokensTestConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	url := startServe(t, "-config", cfg)
	admin := []string{"CIPHERD_URL=" + url, "CIPHERD_TOKEN=" + cliToken}

	out, errOut, code := cipherd(t, admin, "tokens", "create", "--name", "ci-deploy", "--policy", "app", "--ttl", "2h")
	tok := strings.TrimSuffix(out, "\n")
	m := regexp.MustCompile(`^cdt_([0-9a-f]{16})_[A-Za-z0-9_-]{43}$`).FindStringSubmatch(tok)
	if code != 0 || m == nil {
		t.Fatalf("create: exit %d, %q\n%s", code, out, errOut)
	}
	id := m[1]
	if !strings.Contains(errOut, "issued token "+id+" (ci-deploy; policies app), expires ") || strings.Contains(errOut, tok) {
		t.Errorf("create's standard error: %s", errOut)
	}
	asToken := []string{"CIPHERD_URL=" + url, "CIPHERD_TOKEN=" + tok}
	if _, errOut, code := cipherd(t, asToken, "encrypt", "--key", "default"); code != 0 {
		t.Fatalf("encrypt with the issued token: exit %d: %s", code, errOut)
	}

	// --policy repeated or with commas; -json prints the whole answer.
	var both []api.CreatedToken
	for _, args := range [][]string{{"--policy", "app,reader"}, {"--policy", "app", "--policy", "reader"}} {
		out, errOut, code := cipherd(t, admin, append([]string{"tokens", "create", "-json", "--name", "both"}, args...)...)
		var ct api.CreatedToken
		if err := json.Unmarshal([]byte(out), &ct); code != 0 || err != nil {
			t.Fatalf("create %q: exit %d, %v\n%s%s", args, code, err, out, errOut)
		}
		if !strings.HasPrefix(ct.Secret, "cdt_"+ct.ID+"_") || strings.Join(ct.Policies, " ") != "app reader" {
			t.Fatalf("create %q: %+v", args, ct)
		}
		both = append(both, ct)
	}

	// The list, as a table and as JSON (the server and token by flag).
	out, errOut, code = cipherd(t, nil, "tokens", "list", "--server", url, "--token", cliToken)
	if code != 0 || !regexp.MustCompile(`^ID +NAME +POLICIES +CREATED +EXPIRES\n`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^`+id+` +ci-deploy +app +\S+Z +\S+Z$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^`+both[0].ID+` +both +app,reader `).MatchString(out) || strings.Count(out, "\n") != 4 {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = cipherd(t, admin, "tokens", "list", "-json")
	var list api.TokenList
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list.Tokens) != 3 {
		t.Fatalf("list -json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	for _, want := range []string{id, both[0].ID, both[1].ID} {
		if !slices.ContainsFunc(list.Tokens, func(tk api.Token) bool { return tk.ID == want }) {
			t.Errorf("list -json lacks %s:\n%s", want, out)
		}
	}
	for _, ct := range append(both, api.CreatedToken{Secret: tok}) {
		if strings.Contains(out, ct.Secret) {
			t.Errorf("the list shows a token: %s", out)
		}
	}
	// Listing needs tokens-admin, which no token here holds.
	readerToken := []string{"CIPHERD_URL=" + url, "CIPHERD_TOKEN=" + both[0].Secret}
	if _, errOut, code := cipherd(t, readerToken, "tokens", "list"); code != 1 || !strings.Contains(errOut, "forbidden") {
		t.Errorf("list as a token without tokens-admin: exit %d: %s", code, errOut)
	}

	out, errOut, code = cipherd(t, admin, "tokens", "revoke", id, both[1].ID)
	if code != 0 || out != "revoked "+id+"\nrevoked "+both[1].ID+"\n" {
		t.Fatalf("revoke: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := cipherd(t, asToken, "encrypt", "--key", "default"); code != 1 || !strings.Contains(errOut, "unauthenticated") {
		t.Errorf("encrypt with the revoked token: exit %d: %s", code, errOut)
	}
	if _, errOut, code := cipherd(t, admin, "tokens", "revoke", id); code != 1 || !strings.Contains(errOut, "revoke "+id+": ") || !strings.Contains(errOut, "token_not_found") {
		t.Errorf("revoke twice: exit %d: %s", code, errOut)
	}
	// A token given for an id is refused before it leaves, and not printed.
	if out, errOut, code := cipherd(t, admin, "tokens", "revoke", both[0].Secret); code != 1 || strings.Contains(out+errOut, both[0].Secret) || !strings.Contains(errOut, "argument 1") {
		t.Errorf("revoke with a token for an id: exit %d\n%s%s", code, out, errOut)
	}
	if out, _, _ := cipherd(t, admin, "tokens", "list", "-json"); strings.Count(out, `"id"`) != 1 {
		t.Errorf("after revoking two of three tokens:\n%s", out)
	}

	for _, args := range [][]string{
		{"tokens"},
		{"tokens", "rotate"},
		{"tokens", "create", "--name", "x"},
		{"tokens", "create", "--policy", "app"},
		{"tokens", "create", "--name", "x", "--policy", "app,"},
		{"tokens", "list", "extra"},
		{"tokens", "revoke"},
	} {
		if _, errOut, code := cipherd(t, admin, args...); code != 2 {
			t.Errorf("cipherd %q: exit %d, want 2: %s", args, code, errOut)
		}
	}
	if _, errOut, code := cipherd(t, nil, "tokens", "-h"); code != 0 || !strings.Contains(errOut, "cipherd tokens create --name NAME") {
		t.Errorf("tokens -h: exit %d: %s", code, errOut)
	}
}
