package preflight

import (
	"fmt"
	"net/netip"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
)

// ModelTarget is one spark_model target as its plan checks it: the address
// the copy arrives on, the target's own interfaces, and the source node's
// route to that address.
type ModelTarget struct {
	Name    string // the target's key in targets
	SSHHost string
	Address string
	Facts   nodefacts.Facts // the target's interfaces
	// SourceHost is the source's SSH address; SourceRoute the source's
	// route to Address (nil: none).
	SourceHost  string
	SourceRoute *nodefacts.Route
	// Path is where the model goes on the target; Untrusted why the SSH
	// user must not write it there (another user owns or can write the
	// directory or the parent it is made in), "" when it may.
	Path      string
	Untrusted string
}

func (t ModelTarget) attr() finding.Path { return finding.Attr("targets").Key(t.Name).Attr("address") }

// ModelTargetAddress (D22): the receiver binds the target's address, so the
// target must hold it, and the sender dials it from the source, which must
// have a route there. Checked on every plan: a target whose files are all
// there already copies nothing now, but its address is in state for the
// next repair, which would fail far from the change that broke it. A route
// through a gateway still delivers the copy: a warning that it leaves the
// fabric, never a refusal.
func ModelTargetAddress(t ModelTarget) []finding.Finding {
	ip, err := netip.ParseAddr(t.Address)
	if err != nil {
		return nil // validate refused it already
	}
	if ip.IsLoopback() && t.SSHHost != t.SourceHost {
		return []finding.Finding{{Rule: D22, Now: true, Node: t.Name, Path: t.attr(),
			Summary: "The model's target address is loopback",
			Detail: fmt.Sprintf("targets[%q].address = %q: the source node (%s) would send to itself, not to %s (%s). Loopback serves only "+
				"a target on the source's own node. Set address to the target's fabric address.", t.Name, t.Address, t.SourceHost, t.Name, t.SSHHost)}}
	}
	if !t.Facts.HasAddress(ip) {
		return []finding.Finding{{Rule: D22, Now: true, Node: t.Name, Path: t.attr(),
			Summary: "The model's target address is not an address of the target",
			Detail: fmt.Sprintf("targets[%q].address = %q, but %s (%s) holds no such address; its addresses: %s. The target receives the "+
				"copy on that address, so every copy to it (now, or the next repair) would fail to bind. Set address to one of the target's "+
				"own addresses (its fabric address), or check that ssh_host points at the node you meant.",
				t.Name, t.Address, t.Name, t.SSHHost, addresses(t.Facts))}}
	}
	switch r := t.SourceRoute; {
	case r == nil:
		return []finding.Finding{{Rule: D22, Now: true, Node: t.Name, Path: t.attr(),
			Summary: "The model's source cannot reach the target's address",
			Detail: fmt.Sprintf("targets[%q].address = %q is on %s (%s), but the source node (%s) has no route to it, so the source could "+
				"never send the files there. Give an address of the target on a network the source shares (its fabric address), or "+
				"connect the source to that network.", t.Name, t.Address, t.Name, t.SSHHost, t.SourceHost)}}
	case r.Gateway != "":
		return []finding.Finding{{Rule: D22, Warning: true, Node: t.Name, Path: t.attr(),
			Summary: "The model's copy would leave the fabric",
			Detail: fmt.Sprintf("The source node (%s) reaches targets[%q].address = %q through gateway %s on %s, not over a network it "+
				"shares with %s: the copy works, at the routed network's speed. Give the target's address on the source's fabric to copy "+
				"over it.", t.SourceHost, t.Name, t.Address, r.Gateway, r.Dev, t.Name)}}
	}
	return nil
}

// ModelTargetDir (D23): the receiver refuses a directory another user owns
// or can write, or a parent it is made in that another user can write
// without the sticky bit, or a link of another user on the way
// (modelfiles.TrustScript, run at plan and again by the receiver): they
// could put a link where a file arrives and have this user write through
// it. Refused at plan, naming the directory and its owner.
func ModelTargetDir(t ModelTarget) []finding.Finding {
	if t.Untrusted == "" {
		return nil
	}
	return []finding.Finding{{Rule: D23, Node: t.Name, Path: finding.Attr("targets").Key(t.Name).Attr("path"),
		Summary: "The model's target directory is not this SSH user's alone",
		Detail: fmt.Sprintf("targets[%q].path = %q on %s (%s): %s Nothing is copied there.",
			t.Name, t.Path, t.Name, t.SSHHost, t.Untrusted)}}
}
