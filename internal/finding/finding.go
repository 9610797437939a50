// Package finding is what the domain packages report to the user: a plan
// rule's finding (preflight) or an apply's failure (raycluster,
// vllmdeploy, modelcopy), each on an attribute of the resource. It holds
// no rules and does no I/O; internal/resources turns findings into the
// framework's diagnostics in one place (diagnostics.go).
package finding

// Rule is a plan rule's code in the catalogue (internal/preflight,
// rules.go); "" for what is not a plan rule, such as an apply's failure.
type Rule string

// Cite is what a finding's detail ends with: its rule's code, and where the
// catalogue and the troubleshooting guide explain it.
func (r Rule) Cite() string {
	if r == "" {
		return ""
	}
	return "\n\nRule " + string(r) + ` (README "What the plan refuses"; guide "Troubleshooting placement").`
}

// Finding is one thing found, at plan or apply.
type Finding struct {
	Rule    Rule
	Warning bool
	// Now: a fault of what runs now (a registered address gone from its
	// node, a running worker cut off from its head), not a check that only
	// guards a start. A plan that starts nothing still fails on it, so a
	// scheduled `plan -detailed-exitcode` sees it.
	Now     bool
	Node    string // the node it is about, by its name in the resource; "" for none
	Path    Path   // the attribute it is about; empty for the resource as a whole
	Summary string
	Detail  string
}

// Step is one step of an attribute path: an attribute's name, or a map
// element's key.
type Step struct {
	Name  string
	Key   string
	IsKey bool
}

// Path is an attribute path below a resource, such as head.node_ip or
// workers["spark2"].node_ip.
type Path []Step

// Attr is the path of nested attribute names, from the resource down.
func Attr(names ...string) Path {
	p := make(Path, 0, len(names))
	for _, n := range names {
		p = append(p, Step{Name: n})
	}
	return p
}

// Attr is p with an attribute name added (p itself is never changed).
func (p Path) Attr(name string) Path { return append(p[:len(p):len(p)], Step{Name: name}) }

// Key is p with a map key added (p itself is never changed).
func (p Path) Key(key string) Path { return append(p[:len(p):len(p)], Step{Key: key, IsKey: true}) }

// String is p in Terraform's notation, for messages and tests.
func (p Path) String() string {
	s := ""
	for _, st := range p {
		switch {
		case st.IsKey:
			s += `["` + st.Key + `"]`
		case s == "":
			s = st.Name
		default:
			s += "." + st.Name
		}
	}
	return s
}
