package modelcopy

import (
	"context"
	"sync"

	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// Reach is what the plan's address rule (preflight.ModelTargetAddress)
// reads of a model's nodes: each target's interfaces, and the source's
// route to each target's address.
type Reach struct {
	Targets     map[string]nodefacts.Facts  // by target name
	SourceRoute map[string]*nodefacts.Route // by target name; nil: no route
}

// ReadReach reads it: every target and the source at once, one command
// each (the source looks up every address in one). No packet leaves a
// node: `ip route get` asks the routing table.
func (m *Manager) ReadReach(ctx context.Context, src Node, targets []Node) (Reach, error) {
	r := Reach{Targets: map[string]nodefacts.Facts{}, SourceRoute: map[string]*nodefacts.Route{}}
	addrs := make([]string, len(targets))
	for i, t := range targets {
		addrs[i] = t.Address
	}
	var mu sync.Mutex
	var srcErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		a, err := m.addresses(ctx, src, addrs)
		if err != nil {
			srcErr = err
			return
		}
		mu.Lock()
		for i, t := range targets {
			r.SourceRoute[t.Name] = a.Routes[i]
		}
		mu.Unlock()
	})
	_, err := eachTarget(targets, func(t Node) ([]string, error) {
		a, err := m.addresses(ctx, t, nil)
		if err == nil {
			mu.Lock()
			r.Targets[t.Name] = a.Facts()
			mu.Unlock()
		}
		return nil, err
	})
	wg.Wait()
	if srcErr != nil {
		return Reach{}, srcErr
	}
	return r, err
}

// addresses runs nodefacts.AddressesScript on n with routes to look up.
func (m *Manager) addresses(ctx context.Context, n Node, routeTo []string) (nodefacts.Addresses, error) {
	fail := func(err error) (nodefacts.Addresses, error) {
		return nodefacts.Addresses{}, &Error{Node: n.Name, Host: n.Endpoint.Host, Path: n.Path, Err: err}
	}
	conn, err := m.Pool.Get(ctx, n.Endpoint)
	if err != nil {
		return fail(err)
	}
	res, err := conn.Run(ctx, transport.Cmd{Step: "read the node's addresses", Argv: transport.Script(nodefacts.AddressesScript, routeTo...)})
	if err != nil {
		return fail(err)
	}
	a, err := nodefacts.ParseAddresses(string(res.Stdout), len(routeTo))
	if err != nil {
		return fail(err)
	}
	return a, nil
}
