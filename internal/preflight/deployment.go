package preflight

import (
	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
)

// Deployment is everything the plan of one vllm serve looks at, read from
// the head (where vllm serve will run) and from Ray.
type Deployment struct {
	HeadFacts  nodefacts.Facts // read where vllm serve runs: the runtime's container, or the host
	HeadName   string
	SSHHost    string // the head's SSH address, for messages
	HeadIP     string // the address Ray registered (or will register) for the head
	HostIP     string // host_ip; "" unset
	Env        map[string]string
	Table      *ray.Table   // Ray's live table; nil when the cluster does not run yet
	Planned    *PlannedGPUs // the cluster planned in this run (first plan); nil when unknown
	Site       *ServeSite   // where vllm serve and Ray run; nil when neither is known yet
	TP, PP     int
	OwnGPUs    float64 // what this deployment's running server holds
	Port       int     // the HTTP port vllm serve will listen on
	PortIsOwn  bool    // this deployment's running server holds Port (the facts' listeners are its own)
	ValidateIP func(string) error
}

// Concluded is what the deployment's plan concluded.
type Concluded struct {
	PlacementIP string // pinned: VLLM_HOST_IP (or detection); V2: the head's registered address
	Executor    Executor
}

// CheckDeployment runs every rule of a deployment's plan (D1, D2, D8, D9,
// D11) on facts already read. It does no I/O, so every rule's call here is
// unit-tested.
func CheckDeployment(d Deployment) (Concluded, []Diagnostic) {
	var found []Diagnostic
	hostIP, source, conflict := HostIPConflict(HostIPSources{HostIP: d.HostIP, Env: d.Env["VLLM_HOST_IP"], Head: d.HeadFacts.VLLMEnv["VLLM_HOST_IP"]})
	found = append(found, conflict...)
	if source == "env" && d.ValidateIP != nil {
		if err := d.ValidateIP(hostIP); err != nil {
			found = append(found, Diagnostic{Rule: D2, Attr: []string{"env"}, Summary: "Invalid env.VLLM_HOST_IP", Detail: err.Error()})
		}
	}
	flag := ExecutorFlag{}
	if v, ok := d.Env[ExecutorEnv]; ok {
		flag = ExecutorFlag{Value: v, Set: true, Source: "env"}
	} else if v, ok := d.HeadFacts.VLLMEnv[ExecutorEnv]; ok {
		flag = ExecutorFlag{Value: v, Set: true, Source: "head"}
	}
	executor, diags := ResolveExecutor(Build{Version: d.HeadFacts.VLLMVersion, Source: d.HeadFacts.VLLMExecutorSource}, flag)
	found = append(found, diags...)
	placement := hostIP
	if placement == "" {
		placement = d.HeadFacts.DefaultRouteIP
	}
	c := Concluded{PlacementIP: placement, Executor: executor}
	if !executor.Pinned {
		c.PlacementIP = d.HeadIP // RayExecutorV2 places by Ray's own addresses
	}
	if d.Site != nil {
		found = append(found, ServeBesideRay(*d.Site)...)
	}
	p := Placement{PlacementIP: placement, Source: source, HeadIP: d.HeadIP, Table: d.Table, Executor: executor, TP: d.TP, PP: d.PP}
	found = append(found, PlacementIdentity(p)...)
	found = append(found, ParallelFits(p, d.Planned, d.OwnGPUs)...)
	if !d.PortIsOwn {
		found = append(found, ServePortFree(d.SSHHost, d.Port, d.HeadFacts.Listeners)...)
	}
	head := Node{Name: d.HeadName, SSHHost: d.SSHHost, Facts: d.HeadFacts}
	found = append(found, Interfaces(d.Env, []Node{head}, map[string]string{d.HeadName: d.HeadIP})...)
	return c, found
}
