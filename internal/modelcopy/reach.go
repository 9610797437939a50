package modelcopy

import (
	"context"
	"strings"
	"sync"

	"github.com/lab-infra/terraform-provider-spark/internal/modelfiles"
	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// Reach is what the plan's target rules (preflight.ModelTargetAddress,
// ModelTargetDir) read of a model's nodes: each target's interfaces and
// why its directory is not the SSH user's alone, and the source's route to
// each target's address.
type Reach struct {
	Targets     map[string]nodefacts.Facts  // by target name
	SourceRoute map[string]*nodefacts.Route // by target name; nil: no route
	// Untrusted is, by target name, why its directory is not the SSH
	// user's alone (modelfiles.TrustScript); absent when it is.
	Untrusted map[string]string
}

// ReadReach reads it: every target and the source at once, one command
// each (the source looks up every address in one). No packet leaves a
// node: `ip route get` asks the routing table.
func (m *Manager) ReadReach(ctx context.Context, src Node, targets []Node) (Reach, error) {
	r := Reach{Targets: map[string]nodefacts.Facts{}, SourceRoute: map[string]*nodefacts.Route{}, Untrusted: map[string]string{}}
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
		if err != nil {
			return nil, err
		}
		why, err := m.untrusted(ctx, t)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		r.Targets[t.Name] = a.Facts()
		if why != "" {
			r.Untrusted[t.Name] = why
		}
		mu.Unlock()
		return nil, nil
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

// untrusted runs modelfiles.TrustScript on t's directory: why the SSH user
// must not write the model there, or "".
func (m *Manager) untrusted(ctx context.Context, t Node) (string, error) {
	conn, err := m.Pool.Get(ctx, t.Endpoint)
	if err != nil {
		return "", &Error{Node: t.Name, Host: t.Endpoint.Host, Path: t.Path, Err: err}
	}
	res, err := conn.Run(ctx, transport.Cmd{Step: "check the model's directory", Argv: []string{m.python(), "-c", modelfiles.TrustScript, t.Path}})
	if err != nil {
		return "", &Error{Node: t.Name, Host: t.Endpoint.Host, Path: t.Path, Err: err}
	}
	return strings.TrimSpace(string(res.Stdout)), nil
}
