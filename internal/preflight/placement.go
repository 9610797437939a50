package preflight

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/lab-infra/terraform-provider-spark/internal/finding"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
)

// Placement is what the placement rules look at.
type Placement struct {
	PlacementIP string // VLLM_HOST_IP as vLLM will see it, else vLLM's own detection on the head
	// Source says where PlacementIP came from: "host_ip", "env" (VLLM_HOST_IP
	// in the deployment's env), "head" (VLLM_HOST_IP already in the environment
	// vllm serve inherits on the head) or "" (vLLM's detection).
	Source   string
	HeadIP   string     // the address Ray registered (or will register) for the head, where vllm serve runs
	Table    *ray.Table // the live node table; nil when the cluster is not up yet
	Executor Executor
	Sizes    Sizes
}

// HostIPSources are the places VLLM_HOST_IP can come from, for
// HostIPConflict: the deployment's host_ip, its env, and the environment
// vllm serve inherits on the head; Legacy is HOST_IP where the release
// reads it (legacyHostIP). "" means unset.
type HostIPSources struct{ HostIP, Env, Head, Legacy string }

// HostIPConflict (D2): host_ip and env.VLLM_HOST_IP are one setting given
// twice; when both are set they must agree, or which one wins depends on
// how the launch composes them. It returns the effective value and its
// source ("" when vLLM will detect).
func HostIPConflict(s HostIPSources) (string, string, []finding.Finding) {
	switch {
	case s.HostIP != "" && s.Env != "" && s.HostIP != s.Env:
		return s.HostIP, "host_ip", []finding.Finding{{Rule: D2, Path: finding.Attr("env"),
			Summary: "host_ip and env.VLLM_HOST_IP disagree",
			Detail: fmt.Sprintf("host_ip = %q but env sets VLLM_HOST_IP = %q. Both become vLLM's VLLM_HOST_IP; give it once, "+
				"as host_ip, and remove VLLM_HOST_IP from env.", s.HostIP, s.Env)}}
	case s.HostIP != "":
		return s.HostIP, "host_ip", nil
	case s.Env != "":
		return s.Env, "env", nil
	case s.Head != "":
		return s.Head, "head", nil
	case s.Legacy != "":
		return s.Legacy, "HOST_IP", nil
	}
	return "", "", nil
}

func sourceText(src string) string {
	switch src {
	case "host_ip":
		return "host_ip"
	case "env":
		return "env.VLLM_HOST_IP"
	case "head":
		return "VLLM_HOST_IP already set in the environment vllm serve inherits on the head"
	case "HOST_IP":
		return "HOST_IP, which this vLLM reads when VLLM_HOST_IP is unset"
	}
	return "vLLM's own detection on the head (VLLM_HOST_IP unset: the source address of the route to 8.8.8.8)"
}

// PlacementIdentity (D1, the field report). Where the vLLM on the head pins
// bundle 0 of its placement group to node:<placement ip> (see
// ResolveExecutor), that must be a label Ray registered for an alive node,
// and that node must be the head where vllm serve runs, or bundle 0 can never
// be placed: an error. Where it does not pin (RayExecutorV2), vLLM takes the
// addresses from Ray and serves; an explicit VLLM_HOST_IP that Ray did not
// register is then a warning, never an error.
func PlacementIdentity(p Placement) []finding.Finding {
	registered := p.HeadIP
	onHead := p.PlacementIP == registered
	elsewhere := false
	if p.Table != nil {
		if n, ok := p.Table.Alive(p.PlacementIP); ok {
			onHead = onHead && n.IsHead
			elsewhere = !n.IsHead
		} else {
			onHead = false
		}
	}
	if onHead {
		return nil
	}
	e := p.Executor
	if v, ok := ParseVLLMVersion(e.Version); ok && !v.AtLeast(firstPin...) && p.Source != "" {
		// Before the pin, vLLM finds its driver's node by comparing its
		// get_ip() with each worker's own (vllm/executor/ray_gpu_executor.py,
		// 0.5.4 L119/L142/L156): a VLLM_HOST_IP no worker reports stops it.
		return []finding.Finding{{Rule: D1, Path: sourceAttr(p.Source),
			Summary: "vLLM placement address does not match the address Ray registered for the head",
			Detail: fmt.Sprintf("VLLM_HOST_IP = %s (from %s), but Ray %s the head as node:%s. vLLM %s finds the node it runs on by "+
				"comparing that address with the one each Ray worker detects for itself, finds none, and stops at startup: "+
				"\"Ray does not allocate any GPUs on the driver node\".\nFix: host_ip = %q, or start the head with node_ip = %q.",
				p.PlacementIP, sourceText(p.Source), verb(p), registered, e.Version, registered, p.PlacementIP)}}
	}
	if !e.Pinned {
		if p.Source == "" {
			return nil // vLLM detects, and uses Ray's addresses anyway: nothing to say
		}
		return []finding.Finding{{Rule: D1, Warning: true, Path: sourceAttr(p.Source),
			Summary: "VLLM_HOST_IP is not the address Ray registered for the head (this vLLM serves anyway)",
			Detail: fmt.Sprintf("VLLM_HOST_IP = %s (from %s), but Ray %s the head as node:%s.\n"+
				"vLLM %s runs %s (%s): it pins nothing to node:<VLLM_HOST_IP> and takes node addresses from Ray, so this deployment will serve.\n"+
				"With the legacy executor (%s=0), the default of vLLM 0.5.5 to 0.20.x, the same setting would hang: bundle 0 pinned to node:%s, "+
				"\"No available node types can fulfill resource request\", then \"Waiting for creating a placement group\" until 1800 s pass.\n"+
				"To be safe on every vLLM: host_ip = %q, or start the head with node_ip = %q.",
				p.PlacementIP, sourceText(p.Source), verb(p), registered, e.Version, e.Name, e.Why, ExecutorEnv, p.PlacementIP, registered, p.PlacementIP)}}
	}
	why := fmt.Sprintf("no alive Ray node carries the label node:%s, so bundle 0 of vLLM's placement group can never be placed", p.PlacementIP)
	if elsewhere {
		why = fmt.Sprintf("node:%s belongs to a worker, not to the head where vllm serve runs, so vLLM's driver and its bundle 0 would be on different nodes", p.PlacementIP)
	}
	version := e.Version
	if version == "" {
		version = "(version unknown)"
	}
	fixes := fmt.Sprintf("Fix, either:\n  host_ip = %q  (what Ray registered for the head), or\n"+
		"  start the head with node_ip = %q  (so Ray registers the address you meant).", registered, p.PlacementIP)
	if e.Switchable {
		fixes += fmt.Sprintf("\n  Or let vLLM %s use RayExecutorV2, which pins nothing: env = { %s = \"1\" }.", e.Version, ExecutorEnv)
	}
	return []finding.Finding{{Rule: D1, Path: sourceAttr(p.Source),
		Summary: "vLLM placement address does not match the address Ray registered for the head",
		Detail: fmt.Sprintf("vLLM would pin its placement group to node:%s (from %s), but Ray %s the head as node:%s.\n"+
			"vLLM %s runs %s (%s), which pins bundle 0 to node:<VLLM_HOST_IP>.\n"+
			"Registered nodes: %s.\n"+
			"Why it fails: %s. vLLM would log \"Waiting for creating a placement group of specs\" every few seconds for 1800 s while Ray reports "+
			"\"No available node types can fulfill resource request\", although `ray status` shows the GPUs.\n%s",
			p.PlacementIP, sourceText(p.Source), verb(p), registered, version, e.Name, e.Why, labels(p), why, fixes)}}
}

func sourceAttr(src string) finding.Path {
	if src == "env" || src == "HOST_IP" {
		return finding.Attr("env")
	}
	return finding.Attr("host_ip")
}

func verb(p Placement) string {
	if p.Table == nil {
		return "will register"
	}
	return "registered"
}

// labels lists node:<ip> labels, head marked, GPUs per node.
func labels(p Placement) string {
	if p.Table == nil {
		return fmt.Sprintf("node:%s (head; the cluster is not running yet, so this is the planned address)", p.HeadIP)
	}
	var out []string
	for _, n := range p.Table.Nodes {
		if !n.Alive {
			continue
		}
		s := fmt.Sprintf("node:%s (%s, %g GPU)", n.IP, map[bool]string{true: "head", false: "worker"}[n.IsHead], n.Resources["GPU"])
		out = append(out, s)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "none alive"
	}
	return strings.Join(out, ", ")
}

// PlannedGPUs is what a cluster planned in the same run will register:
// the deployment's first plan, before any Ray runs.
type PlannedGPUs struct {
	Total float64
	Head  float64 // the head's own
	Nodes string  // for messages: "head 1, spark2 1"
}

// ParallelFits (D8): vLLM asks Ray for one GPU bundle per rank: TP x PP
// (x PCP) per data-parallel rank, times the data-parallel size
// (vllm/config/parallel.py L945-949, 0.32.0). On a live cluster they must
// fit the GPUs of the alive nodes less those that placement groups of other
// deployments hold (own: what this deployment's running server holds, and
// frees on restart); on a cluster planned in the same run, the GPUs its
// nodes will register. Otherwise vLLM waits for a placement group that can
// never be placed ("Cannot provide a placement group requiring N GPUs"
// after 1800 s; vllm/v1/executor/ray_utils.py, 0.32.0).
func ParallelFits(p Placement, planned *PlannedGPUs, own float64) []finding.Finding {
	need := p.Sizes.GPUs()
	attr := finding.Attr("tensor_parallel_size")
	if p.Table == nil {
		if planned == nil || float64(need) <= planned.Total {
			return nil
		}
		return []finding.Finding{{Rule: D8, Path: attr, Summary: "The parallel sizes exceed the cluster's GPUs",
			Detail: fmt.Sprintf("%s GPUs, but the cluster planned with it will "+
				"register %g (%s). vLLM would wait for a placement group that can never be placed. Lower the sizes, or add workers with GPUs.",
				p.Sizes.describe(), planned.Total, planned.Nodes)}}
	}
	var total float64
	for _, n := range p.Table.Nodes {
		if n.Alive {
			total += n.Resources["GPU"]
		}
	}
	if float64(need) > total {
		return []finding.Finding{{Rule: D8, Path: attr, Summary: "The parallel sizes exceed the cluster's GPUs",
			Detail: fmt.Sprintf("%s GPUs, but the alive nodes Ray registered have %g "+
				"(%s). vLLM would wait for a placement group that can never be placed. Lower the sizes, or add workers with GPUs.",
				p.Sizes.describe(), total, labels(p))}}
	}
	if why := p.Table.GroupsUnread; why != "" {
		return []finding.Finding{{Rule: D8, Warning: true, Path: attr, Summary: "Cannot tell whether the GPUs are free",
			Detail: fmt.Sprintf("%s GPUs of the cluster's %g, but Ray's placement groups could not be read on the head "+
				"(Ray %s: %s), so the GPUs other deployments hold are not known. If they hold too many, vLLM waits for its placement group "+
				"until 1800 s pass. `ray list placement-groups` on the head shows them.", p.Sizes.describe(), total, p.Table.RayVersion, why)}}
	}
	var held float64
	var holders []string
	for _, g := range p.Table.PlacementGroups {
		if g.State != "CREATED" || g.GPUs == 0 {
			continue
		}
		held += g.GPUs
		holders = append(holders, fmt.Sprintf("%g GPU by placement group %s (%s)", g.GPUs, g.ID, g.Holder))
	}
	free := total - held + own
	if float64(need) <= free {
		return nil
	}
	sort.Strings(holders)
	return []finding.Finding{{Rule: D8, Path: attr, Summary: "Not enough free GPUs: other deployments hold them",
		Detail: fmt.Sprintf("%s GPUs, but only %g of the cluster's %g are free: "+
			"held are %s. vLLM would wait for its placement group until 1800 s pass (\"Cannot provide a placement group requiring %d GPUs\"). "+
			"Stop the deployment that holds them, lower the sizes, or add workers with GPUs.",
			p.Sizes.describe(), max(free, 0), total, strings.Join(holders, "; "), need)}}
}

// HeadGPUForDriver (D8): vLLM's legacy executor (0.5.5-0.32.x) needs a free
// GPU on the node vllm serve runs on, or it stops: "Current node has no GPU
// available" (vllm/v1/executor/ray_utils.py L629-635, 0.32.0; L364-372 of
// vllm/executor/ray_utils.py, 0.11.0: Ray's available_resources_per_node,
// so GPUs other placement groups hold there do not count). Checked on the
// live table, or on what a cluster planned in the same run will register
// on its head, for a first launch only: a restart of a deployment frees
// what its own server held (CheckDeployment).
func HeadGPUForDriver(p Placement, planned *PlannedGPUs, own float64) []finding.Finding {
	e := p.Executor
	if e.Name != ExecutorLegacy || !e.Pinned || own > 0 {
		return nil
	}
	var has string
	switch {
	case p.Table != nil:
		head, ok := p.Table.Head()
		if !ok || p.Table.GroupsUnread == "" && p.Table.FreeGPUs(head) >= 1 || p.Table.GroupsUnread != "" && head.Resources["GPU"] >= 1 {
			return nil // unread groups: ParallelFits says the plan cannot tell
		}
		has = fmt.Sprintf("the head (node:%s) has %g registered and %g free", head.IP, head.Resources["GPU"], p.Table.FreeGPUs(head))
	case planned != nil && planned.Head < 1:
		has = fmt.Sprintf("the cluster planned with it will register %g on its head (%s)", planned.Head, planned.Nodes)
	default:
		return nil
	}
	return []finding.Finding{{Rule: D8, Path: finding.Attr("tensor_parallel_size"), Summary: "No free GPU on the head for vLLM's legacy executor",
		Detail: fmt.Sprintf("vLLM %s runs %s (%s), which needs a free GPU on the node vllm serve runs on, but %s. "+
			"vLLM would stop at startup: \"Current node has no GPU available\". Free a GPU on the head "+
			"(stop the deployment whose placement group holds it), start the head with a GPU, or use RayExecutorV2 where the release has it.",
			e.Version, e.Name, e.Why, has)}}
}

// DataParallelMaster (D1, data parallel): with --data-parallel-backend ray
// vLLM places every data-parallel rank through Ray with the DP master
// first, found by its node:<ip> label, in every release that has it,
// RayExecutorV2-only ones included (vllm/v1/engine/utils.py L170-176, 0.32.0;
// L175-181, 0.33.0): "The DP master node (ip: X) is missing or dead". The
// master's address is --data-parallel-address, else vLLM's get_ip()
// (VLLM_HOST_IP, else its detection: vllm/engine/arg_utils.py L2498-2504),
// and vllm serve binds it on the head, so it must be the head's registered
// address.
func DataParallelMaster(p Placement) []finding.Finding {
	if !p.Sizes.DPOverRay {
		return nil
	}
	ip, from := p.PlacementIP, sourceText(p.Source)
	if p.Sizes.DPAddress != "" {
		ip, from = p.Sizes.DPAddress, "--data-parallel-address in extra_args"
	}
	if ip == p.HeadIP {
		if p.Table == nil {
			return nil
		}
		if n, ok := p.Table.Alive(ip); ok && n.IsHead {
			return nil
		}
	}
	return []finding.Finding{{Rule: D1, Path: finding.Attr("extra_args"),
		Summary: "The data-parallel master address is not the address Ray registered for the head",
		Detail: fmt.Sprintf("With --data-parallel-backend ray, vLLM places its data-parallel ranks on the Ray node labelled node:%s "+
			"(from %s), but Ray %s the head as node:%s. Registered nodes: %s.\nvLLM %s would stop at startup: \"The DP master node "+
			"(ip: %s) is missing or dead\"; every vLLM release with data parallel over Ray places it this way, whichever executor it runs.\n"+
			"Fix: host_ip = %q (or --data-parallel-address %s), or start the head with node_ip = %q.",
			ip, from, verb(p), p.HeadIP, labels(p), p.Executor.Version, ip, p.HeadIP, p.HeadIP, ip)}}
}

// RayAddressIsHead (D21): ray_address must be the head address of a
// spark_ray_cluster planned in this run, or a Ray that answers at plan,
// and then the one whose head is the deployment's head: vllm serve
// attaches to it from there, and vLLM's driver runs on its own node. An
// address that is neither is refused, whether nothing answered there or
// the plan could not tell (vllm serve would wait for a GCS that never
// answers, then time out).
func RayAddressIsHead(d Deployment) []finding.Finding {
	switch {
	case d.Table == nil && d.ClusterInRun:
		return nil
	case d.Table == nil && d.RayDown:
		return []finding.Finding{{Rule: D21, Path: finding.Attr("ray_address"), Summary: "No Ray answers at ray_address",
			Detail: fmt.Sprintf("ray_address = %q, but nothing answers there from the head (%s), and no spark_ray_cluster in this "+
				"configuration has that head address. vllm serve would fail to connect to Ray. Use spark_ray_cluster.<name>.head_address, "+
				"or start the cluster first.", d.RayAddress, d.SSHHost)}}
	case d.Table == nil:
		why := d.RayUnread
		if why == "" {
			why = "no answer"
		}
		return []finding.Finding{{Rule: D21, Path: finding.Attr("ray_address"), Summary: "No Ray answers at ray_address",
			Detail: fmt.Sprintf("ray_address = %q: no Ray GCS answered there from the head (%s) at plan (%s), and no spark_ray_cluster "+
				"in this configuration has that head address. vllm serve would wait for a GCS that never answers, then time out. "+
				"Use spark_ray_cluster.<name>.head_address, or give the address of a running Ray head this node reaches.",
				d.RayAddress, d.SSHHost, why)}}
	}
	head, ok := d.Table.Head()
	if !ok {
		return nil
	}
	if d.HeadFacts.HasAddress(parseAddr(head.IP)) {
		return nil
	}
	return []finding.Finding{{Rule: D21, Path: finding.Attr("ray_address"), Summary: "ray_address is a Ray whose head is another node",
		Detail: fmt.Sprintf("ray_address = %q answers, but that Ray's head is node:%s (%s), which is not an address of the deployment's "+
			"head %s (its addresses: %s). vllm serve would run its driver outside that cluster's head. Point head.ssh_host at the "+
			"cluster's head, or ray_address at the cluster this head runs.", d.RayAddress, head.IP, head.Hostname, d.SSHHost, addresses(d.HeadFacts))}}
}

// ServeSite is where vllm serve would run and where the head's Ray runs:
// "on the host" or "in container NAME".
type ServeSite struct {
	Serve, Ray string
	SSHHost    string
	RayAddress string
	// Live: the cluster runs; Recorded is then the GCS address Ray recorded
	// where vllm serve would run (<temp>/ray/ray_current_cluster, "" none).
	// Not live: the cluster is planned in this run, and Ray is where it
	// will run.
	Live     bool
	Recorded string
}

// ServeBesideRay (D11): vllm serve must run where the head's Ray runs (its
// container, or the host), or vLLM attaches to no cluster, or to another,
// or starts a local one whose only GPU is the head's.
func ServeBesideRay(s ServeSite) []finding.Finding {
	var found string
	switch {
	case s.Live && s.Recorded == s.RayAddress:
		return nil
	case s.Live && s.Recorded == "":
		found = "where no Ray cluster is recorded at all"
	case s.Live:
		found = fmt.Sprintf("where Ray records the cluster %q", s.Recorded)
	case s.Serve == s.Ray:
		return nil
	default:
		found = fmt.Sprintf("but the cluster's runtime puts Ray %s", s.Ray)
	}
	return []finding.Finding{{Rule: D11, Path: finding.Attr("runtime"), Summary: "vllm serve would run outside the head's Ray",
		Detail: fmt.Sprintf("vllm serve would run %s on %s, %s; ray_address is %q. vLLM would attach to the wrong "+
			"Ray or start a new local one, whose only GPU is the head's. Give the deployment the runtime the cluster "+
			"runs in: runtime = spark_ray_cluster.<name>.runtime.", s.Serve, s.SSHHost, found, s.RayAddress)}}
}

// parseAddr is netip.ParseAddr for a value that may not be an address (an
// invalid Addr then matches nothing).
func parseAddr(s string) netip.Addr {
	a, _ := netip.ParseAddr(s)
	return a
}
