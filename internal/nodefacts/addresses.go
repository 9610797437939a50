package nodefacts

import (
	"fmt"
	"strconv"
)

// AddressesScript prints a node's interfaces and, for each address given
// as an argument, the kernel's route to it: what spark_model's plan needs
// of a target (the addresses it holds) and of the source (its reach to
// each target's address), without Script's Python. `ip route get` is a
// routing-table lookup: no packet leaves the node.
const AddressesScript = `echo @@interfaces; ip -j addr show 2>/dev/null
i=0
for a in "$@"; do
  echo "@@route_$i"; ip -j route get "$a" 2>/dev/null
  i=$((i+1))
done
echo @@end
`

// Addresses is what AddressesScript read on a node.
type Addresses struct {
	Interfaces []Interface
	// Routes[i] is the route to the script's i-th argument, nil where the
	// node has none.
	Routes []*Route
}

// ParseAddresses reads AddressesScript's output, run with n addresses.
func ParseAddresses(out string, n int) (Addresses, error) {
	s := sections(out)
	if _, ok := s["end"]; !ok {
		return Addresses{}, fmt.Errorf("node addresses output is truncated (no end marker): %q", tail(out))
	}
	var a Addresses
	var err error
	if a.Interfaces, err = parseInterfaces(s["interfaces"]); err != nil {
		return Addresses{}, err
	}
	a.Routes = make([]*Route, n)
	for i := range n {
		if a.Routes[i], err = parseRouteTo(s["route_"+strconv.Itoa(i)]); err != nil {
			return Addresses{}, err
		}
	}
	return a, nil
}

// Facts is a as the Facts the plan's rules take (interfaces only).
func (a Addresses) Facts() Facts { return Facts{Interfaces: a.Interfaces} }
