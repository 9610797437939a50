package nodefacts

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"
)

// The script runs under the machine's own shell and iproute2: its output
// parses, loopback is among the interfaces, and the route to 127.0.0.1
// comes back first, in argument order.
func TestAddressesScriptOnThisMachine(t *testing.T) {
	out, err := exec.Command("/bin/sh", "-c", AddressesScript, "sh", "127.0.0.1", "::1").Output()
	if err != nil {
		t.Fatal(err)
	}
	a, err := ParseAddresses(string(out), 2)
	if err != nil {
		t.Fatal(err)
	}
	if f := a.Facts(); !f.HasAddress(netip.MustParseAddr("127.0.0.1")) {
		t.Fatalf("loopback not among the interfaces: %+v", a.Interfaces)
	}
	if len(a.Routes) != 2 || a.Routes[0] == nil || a.Routes[0].Dev != "lo" {
		t.Fatalf("route to 127.0.0.1: %+v", a.Routes)
	}
}

func TestParseAddresses(t *testing.T) {
	out := strings.Join([]string{"@@interfaces",
		`[{"ifname":"lo","mtu":65536,"flags":["LOOPBACK","UP"],"addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8}]},` +
			`{"ifname":"enP7s7","mtu":9000,"flags":["UP"],"addr_info":[{"family":"inet","local":"192.168.200.12","prefixlen":24}]}]`,
		"@@route_0", `[{"dst":"192.168.200.13","dev":"enP7s7","prefsrc":"192.168.200.12"}]`,
		"@@route_1",
		"@@end", ""}, "\n")
	a, err := ParseAddresses(out, 2)
	if err != nil {
		t.Fatal(err)
	}
	if f := a.Facts(); !f.HasAddress(netip.MustParseAddr("192.168.200.12")) {
		t.Fatal("fabric address not read")
	}
	if a.Routes[0] == nil || a.Routes[0].Dev != "enP7s7" || a.Routes[0].Src != "192.168.200.12" || a.Routes[1] != nil {
		t.Fatalf("routes: %+v %+v", a.Routes[0], a.Routes[1])
	}
	if _, err := ParseAddresses(strings.TrimSuffix(out, "@@end\n"), 2); err == nil {
		t.Fatal("truncated output accepted")
	}
}
