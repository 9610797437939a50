package finding

import "testing"

func TestPathNotation(t *testing.T) {
	base := Attr("workers")
	a := base.Key("spark2").Attr("node_ip")
	b := base.Key("spark3").Attr("ssh_host")
	for _, c := range []struct {
		p    Path
		want string
	}{
		{Attr("head", "node_ip"), "head.node_ip"},
		{a, `workers["spark2"].node_ip`},
		{b, `workers["spark3"].ssh_host`}, // a second path from the same base leaves the first as it was
		{Attr(), ""},
	} {
		if got := c.p.String(); got != c.want {
			t.Errorf("%#v = %q, want %q", c.p, got, c.want)
		}
	}
	if a.String() != `workers["spark2"].node_ip` || len(base) != 1 {
		t.Errorf("building on a path changed it: %s, base %s", a, base)
	}
}

func TestCiteNamesTheRule(t *testing.T) {
	if Rule("").Cite() != "" {
		t.Error("no rule, no citation")
	}
	if got := Rule("D12").Cite(); got == "" || got[:9] != "\n\nRule D1" {
		t.Errorf("Cite = %q", got)
	}
}
