package preflight

import (
	"fmt"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/inputs"
	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
)

// Deployment is everything the plan of one vllm serve looks at, read from
// the head (where vllm serve will run), from Ray, and from the cluster's
// plan in the same run.
type Deployment struct {
	HeadFacts nodefacts.Facts // read where vllm serve runs: the runtime's container, or the host
	HeadName  string
	SSHHost   string // the head's SSH address, for messages
	HeadIP    string // the address Ray registered (or will register) for the head
	HostIP    string // host_ip; "" unset
	Env       map[string]string
	Table     *ray.Table   // Ray's live table; nil when the cluster does not run yet
	Planned   *PlannedGPUs // the cluster planned in this run (first plan); nil when unknown
	Site      *ServeSite   // where vllm serve and Ray run; nil when neither is known yet
	Sizes     Sizes
	OwnGPUs   float64 // what this deployment's running server holds
	Port      int     // the HTTP port vllm serve will listen on
	PortIsOwn bool    // this deployment's running server holds Port (the facts' listeners are its own)
	// FailOnEnviron: extra_args has --fail-on-environ-validation.
	FailOnEnviron bool
	ExtraArgs     []string // extra_args, for the memory estimate
	// RayAddress is ray_address; RayDown says nothing answered there
	// (refused, or no GCS); RayUnread, when neither a table nor RayDown
	// came back, is why the table could not be read (a timeout, no
	// route). ClusterInRun: a spark_ray_cluster with this head address is
	// planned in this run.
	RayAddress   string
	RayDown      bool
	RayUnread    string
	ClusterInRun bool
	// Nodes: the cluster's nodes (the head first) as its plan in this run
	// read them; nil when the cluster is managed elsewhere. ClusterEnv is
	// that cluster's env (what its Ray processes, and so vLLM's workers,
	// start with).
	Nodes      []ClusterNode
	ClusterEnv map[string]string
	// Model and Listings (node name -> its listing of the model) for the
	// weights rule; Listings is nil when the model is not a local path or
	// an offline Hugging Face snapshot.
	Model    string
	Listings map[string]Listing
	// Restart: this deployment had a server of its own, stopped before the
	// launch (see HeadGPUForDriver).
	Restart bool
}

// Concluded is what the deployment's plan concluded.
type Concluded struct {
	PlacementIP string // pinned: VLLM_HOST_IP (or detection); V2: the head's registered address
	Executor    Executor
}

// Prepare resolves what the rules that reach past the head need: the
// executor, and so which nodes will host vLLM's workers (their model
// listings are read next, then CheckDeployment runs).
func Prepare(d Deployment) (Executor, []ClusterNode) {
	e, _ := ResolveExecutor(d.build(), d.executorFlag())
	return e, HostingNodes(d.Nodes, e, d.Sizes.GPUs())
}

func (d Deployment) build() Build {
	return Build{Version: d.HeadFacts.VLLMVersion, Source: d.HeadFacts.VLLMExecutorSource}
}

func (d Deployment) executorFlag() ExecutorFlag {
	if v, ok := d.Env[ExecutorEnv]; ok {
		return ExecutorFlag{Value: v, Set: true, Source: "env"}
	} else if v, ok := d.HeadFacts.VLLMEnv[ExecutorEnv]; ok {
		return ExecutorFlag{Value: v, Set: true, Source: "head"}
	}
	return ExecutorFlag{}
}

// CheckDeployment runs every rule of a deployment's plan (D1, D2, D8, D9,
// D11, D17-D21) on facts already read. It does no I/O, so every rule's call
// here is unit-tested.
func CheckDeployment(d Deployment) (Concluded, []finding.Finding) {
	var found []finding.Finding
	src := HostIPSources{HostIP: d.HostIP, Env: d.Env["VLLM_HOST_IP"], Head: d.HeadFacts.VLLMEnv["VLLM_HOST_IP"]}
	src.Legacy = legacyHostIP(d.HeadFacts.VLLMVersion, d.Env["HOST_IP"], d.HeadFacts.VLLMEnv["HOST_IP"])
	hostIP, source, conflict := HostIPConflict(src)
	found = append(found, conflict...)
	if source == "env" || source == "HOST_IP" {
		if err := inputs.HostIP(hostIP); err != nil {
			found = append(found, finding.Finding{Rule: D2, Path: finding.Attr("env"), Summary: "Invalid env." + map[bool]string{true: "HOST_IP", false: "VLLM_HOST_IP"}[source == "HOST_IP"], Detail: err.Error()})
		}
	}
	executor, diags := ResolveExecutor(d.build(), d.executorFlag())
	found = append(found, failOnEnviron(diags, d)...)
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
	found = append(found, RayAddressIsHead(d)...)
	if d.Table != nil && !d.ClusterInRun { // a cluster this configuration plans is checked there
		found = append(found, RayRelease(d.Table.RayVersion, "the cluster at ray_address "+d.RayAddress, finding.Attr("ray_address"))...)
	}
	// The placement rules judge the head's identity: Ray's live table, or
	// the cluster planned in this run. Without either there is none to
	// judge (D21 refused the address), and no "will serve" is promised.
	if d.Table != nil || d.ClusterInRun {
		p := Placement{PlacementIP: placement, Source: source, HeadIP: d.HeadIP, Table: d.Table, Executor: executor, Sizes: d.Sizes}
		found = append(found, PlacementIdentity(p)...)
		found = append(found, DataParallelMaster(p)...)
		found = append(found, ParallelFits(p, d.Planned, d.OwnGPUs)...)
		if !d.Restart {
			found = append(found, HeadGPUForDriver(p, d.Planned, d.OwnGPUs)...)
		}
	}
	if !d.PortIsOwn {
		found = append(found, ServePortFree(d.SSHHost, d.Port, d.HeadFacts.Listeners)...)
	}
	head := Node{Name: d.HeadName, SSHHost: d.SSHHost, Facts: d.HeadFacts}
	hosts := HostingNodes(d.Nodes, executor, d.Sizes.GPUs())
	found = append(found, WorkerInterfaces(d.Env, d.ClusterEnv, executor, head, d.HeadIP, hosts)...)
	found = append(found, VLLMOnWorkers(head, hosts)...)
	if d.Listings != nil {
		found = append(found, Weights(d.Model, d.HeadName, hosts, d.Listings)...)
		found = append(found, MemoryFit(d, hosts)...)
	}
	return c, found
}

// legacyHostIP is HOST_IP where the vLLM on the head reads it: 0.4.0-0.4.1
// read only HOST_IP (vllm/utils.py L176), 0.4.2-0.6.4.post1 read it when
// VLLM_HOST_IP is unset (vllm/envs.py, 0.6.4.post1 L159); from 0.6.5 it is
// ignored with a warning (vllm/utils.py L418-420).
func legacyHostIP(version, env, head string) string {
	v, ok := ParseVLLMVersion(version)
	if !ok || v.AtLeast(0, 6, 5) {
		return ""
	}
	if env != "" {
		return env
	}
	return head
}

// failOnEnviron: with --fail-on-environ-validation (vLLM 0.17.0 and later,
// vllm/engine/arg_utils.py; vllm/platforms/interface.py L1463-1470 in
// 0.33.0) a VLLM_ variable the release does not define stops vLLM at
// startup ("Unknown vLLM environment variable detected") instead of being
// warned about: D18's warning becomes an error.
func failOnEnviron(diags []finding.Finding, d Deployment) []finding.Finding {
	if !d.FailOnEnviron {
		return diags
	}
	for i, x := range diags {
		if x.Rule == D18 && x.Warning {
			diags[i].Warning = false
			diags[i].Summary = ExecutorEnv + " stops this vLLM at startup"
			diags[i].Detail += fmt.Sprintf("\nWith --fail-on-environ-validation in extra_args, vLLM refuses a variable it does not define: "+
				"\"Unknown vLLM environment variable detected: %s\".", ExecutorEnv)
		}
	}
	return diags
}
