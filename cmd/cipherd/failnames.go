package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/cipherd/cipherd/kernels"
	"github.com/cipherd/cipherd/selftest"
)

// checkFailNames refuses a -fail list (or, when it is empty,
// CIPHERD_SELFTEST_FAIL) with an entry that would inject no failure: a
// name the self-tests do not know, or an implementation this CPU cannot
// run. A typo must not pass for a self-test that survived its fault.
func checkFailNames(spec string) error {
	from := "-fail"
	if spec == "" {
		spec, from = os.Getenv("CIPHERD_SELFTEST_FAIL"), "CIPHERD_SELFTEST_FAIL"
	}
	valid := map[string]bool{"*": true}
	var kats, ciphers, impls []string
	for _, k := range selftest.KATs() {
		valid[strings.ToLower(k.Name)] = true
		kats = append(kats, k.Name)
		if k.Cipher == 0 || valid[strings.ToLower(k.Cipher.String())] {
			continue
		}
		valid[strings.ToLower(k.Cipher.String())] = true
		ciphers = append(ciphers, k.Cipher.String())
		for _, im := range kernels.Available(k.Cipher) {
			valid[strings.ToLower(im.String())] = true
			impls = append(impls, im.String())
		}
	}
	var unknown []string
	for _, tok := range strings.Split(spec, ",") {
		if tok = strings.TrimSpace(tok); tok != "" && !valid[strings.ToLower(tok)] {
			unknown = append(unknown, tok)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	var unavailable []string
	for _, c := range kernels.Ciphers() {
		for _, im := range kernels.Implementations(c) {
			if !im.Available() && slices.ContainsFunc(unknown, func(tok string) bool { return strings.EqualFold(tok, im.String()) }) {
				unavailable = append(unavailable, im.String())
			}
		}
	}
	var b strings.Builder
	q := make([]string, len(unknown))
	for i, tok := range unknown {
		q[i] = fmt.Sprintf("%q", tok)
	}
	fmt.Fprintf(&b, "%s: %s names no known-answer test, cipher or implementation", from, strings.Join(q, ", "))
	if len(unavailable) > 0 {
		fmt.Fprintf(&b, " (%s: not available on this CPU)", strings.Join(unavailable, ", "))
	}
	b.WriteString("; valid names, matched without regard to case:\n  * (everything)")
	for _, l := range []struct {
		what  string
		names []string
	}{{"ciphers", ciphers}, {"implementations", impls}, {"known-answer tests", kats}} {
		fmt.Fprintf(&b, "\n  %s:", l.what)
		for _, line := range wrap(strings.Join(l.names, ", "), 74) {
			b.WriteString("\n    " + line)
		}
	}
	return fmt.Errorf("%s", b.String())
}
