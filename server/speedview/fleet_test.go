package speedview

import (
	"strings"
	"testing"
)

// flagMixed flags the replicas outside the most common selection, and the
// note tells an AEAD split from an implementation split.
func TestFleetFlagMixed(t *testing.T) {
	host := func(id, aead, impl string) FleetHost {
		return FleetHost{Replica: id, Hostname: "h", AEAD: aead, Implementations: map[string]string{"aes-256-gcm": impl, "chacha20-poly1305": "avx2"}}
	}
	v := &FleetView{Shared: true, Hosts: []FleetHost{host("a", "aes-256-gcm", "vaes512"), host("b", "aes-256-gcm", "vaes256"), host("c", "aes-256-gcm", "vaes512")}}
	v.flagMixed()
	if !v.Mixed || v.Hosts[0].Differs || !v.Hosts[1].Differs || v.Hosts[2].Differs {
		t.Fatalf("implementation split: mixed %v, differs %v %v %v", v.Mixed, v.Hosts[0].Differs, v.Hosts[1].Differs, v.Hosts[2].Differs)
	}
	if n := v.note(); !strings.Contains(n, "All seal with aes-256-gcm, with different implementations") {
		t.Errorf("note: %q", n)
	}
	v = &FleetView{Shared: true, Hosts: []FleetHost{host("a", "aes-256-gcm", "vaes256"), host("b", "aes-256-gcm", "vaes256")}}
	v.flagMixed()
	if v.Mixed || v.Hosts[0].Differs || v.Hosts[1].Differs {
		t.Fatal("a uniform fleet is flagged")
	}
	if n := v.note(); n != "Every replica makes the same selection: aes-256-gcm." {
		t.Errorf("note: %q", n)
	}
}
