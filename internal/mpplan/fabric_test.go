package mpplan

import (
	"strings"
	"testing"
)

// D33 between rank 0's node and the others: an MTU that differs is warned
// of, naming both ends; a port down is left to D27.
func TestFabricLinks(t *testing.T) {
	s := pair()
	seen := seenPair()
	if got := FabricLinks(s, nil, seen); len(got) != 0 {
		t.Fatalf("the lab pair: %v", got)
	}
	edit(seen, "spark1", func(sn *Seen) { sn.Facts.Interfaces[2].MTU = 9000 })
	edit(seen, "spark2", func(sn *Seen) { sn.Facts.Interfaces[2].MTU = 1500 })
	got := FabricLinks(s, nil, seen)
	if len(got) != 1 || got[0].Rule != D33 || !got[0].Warning || got[0].Node != "spark2" || got[0].Path.String() != `nodes["spark2"]` ||
		!strings.Contains(got[0].Detail, "eth1 on spark1 has MTU 9000, eth1 on spark2 has MTU 1500") {
		t.Fatalf("%+v", got)
	}
	edit(seen, "spark2", func(sn *Seen) { sn.Facts.Interfaces[2].MTU, sn.Facts.Interfaces[2].Up = 9000, false })
	if got := FabricLinks(s, nil, seen); len(got) != 0 {
		t.Fatalf("a port down is D27's: %v", got)
	}
}
