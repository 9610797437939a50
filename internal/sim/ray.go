package sim

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// tableRow is one node of ray.NodesScript's output, as ray.ParseNodes reads it.
type tableRow struct {
	ID        string             `json:"id"`
	Alive     bool               `json:"alive"`
	IP        string             `json:"ip"`
	Hostname  string             `json:"hostname"`
	IsHead    bool               `json:"is_head"`
	Resources map[string]float64 `json:"resources"`
	Labels    map[string]string  `json:"labels"`
}

// table answers ray.NodesScript for the GCS at gcsAddr: every raylet that
// joined it, the head first, or the GCS down when none serves there.
func (m *Model) table(gcsAddr string) string {
	up, version, rows, pgs := m.gcsTables(gcsAddr)
	if !up {
		return "@@nodes " + jsonString(map[string]any{"gcs": "down", "error": "[Errno 111] Connection refused"}) + "\n"
	}
	return "@@nodes " + jsonString(map[string]any{"gcs": "up", "ray_version": version, "nodes": rows,
		"placement_groups": pgs}) + "\n"
}

// gcsTables is what the GCS at gcsAddr holds, whichever way it is read
// (NodesScript, or its gRPC service: gcs.go): whether it runs, the Ray
// version its head recorded, its nodes and its placement groups.
func (m *Model) gcsTables(gcsAddr string) (up bool, version string, rows []tableRow, pgs []placementGroup) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.headOf(gcsAddr) == nil {
		return false, "", nil, nil
	}
	rows = []tableRow{}
	version = RayVersion
	now := time.Now()
	for i, r := range m.rays {
		if r != nil && r.gcsAddr == gcsAddr && !now.Before(r.registers) {
			rows = append(rows, m.row(i, r))
			if r.head {
				version = m.nodes[i].RayVersion
			}
		}
	}
	for _, d := range m.dead {
		if d.gcsAddr == gcsAddr {
			rows = append(rows, d.row)
		}
	}
	return true, version, rows, m.placementGroups(gcsAddr, rows)
}

// placementGroup is one row of NodesScript's placement groups.
type placementGroup struct {
	ID     string             `json:"id"`
	State  string             `json:"state"`
	GPUs   float64            `json:"gpus"`
	GPUsOn map[string]float64 `json:"gpus_on"`
	Holder string             `json:"holder"`

	// Its driver, as the GCS's job table has it (gcs.go): the process
	// vllm serve started, pid+1 of the serve's own, on the serve's node.
	driverPID int
	driverIP  string
	serve     *vllmServer
}

// placementGroups are what the vllm serves that joined the cluster at
// gcsAddr hold: one group each, of one GPU bundle per rank, packed onto
// the alive nodes in the table's order (the head first), as Ray's PACK
// strategy places them; the caller holds mu.
func (m *Model) placementGroups(gcsAddr string, rows []tableRow) []placementGroup {
	free := map[string]float64{}
	for _, r := range rows {
		if r.Alive {
			free[r.ID] = r.Resources["GPU"]
		}
	}
	pgs := []placementGroup{}
	for i := range m.vllms {
		for _, v := range m.vllms[i] {
			if v.env["RAY_ADDRESS"] != gcsAddr {
				continue
			}
			pg := placementGroup{ID: v.pgID, State: "CREATED", GPUs: float64(v.gpus), GPUsOn: map[string]float64{},
				Holder:    fmt.Sprintf("%s (pid %d), driver pid %d on %s", strings.Join(v.cmdline, " "), v.pid, v.pid+1, m.nodes[i].IP),
				driverPID: v.pid + 1, driverIP: m.nodes[i].IP.String(), serve: v}
			left := float64(v.gpus)
			for _, r := range rows {
				if take := min(left, free[r.ID]); take > 0 {
					pg.GPUsOn[r.ID], free[r.ID], left = take, free[r.ID]-take, left-take
				}
			}
			pgs = append(pgs, pg)
		}
	}
	for _, g := range m.removed {
		if g.gcsAddr == gcsAddr {
			pgs = append(pgs, g.group)
		}
	}
	return pgs
}

// removedGroup is a placement group the GCS at gcsAddr keeps as REMOVED.
type removedGroup struct {
	gcsAddr string
	group   placementGroup
}

// row is what Ray registers for raylet r on node i: its own resources
// (node:<ip>, the accelerator, CPU, memory) beside the custom ones.
func (m *Model) row(i int, r *raylet) tableRow {
	res := map[string]float64{"CPU": cpusPerNode, "memory": 96e9, "object_store_memory": 20e9, "node:" + r.ip: 1}
	if r.gpus > 0 {
		res["GPU"] = r.gpus
		res["accelerator_type:GB10"] = 1
	}
	if r.head {
		res["node:__internal_head__"] = 1
	}
	for k, v := range r.resources {
		res[k] = v
	}
	labels := map[string]string{"ray.io/node-id": r.id}
	for k, v := range r.labels {
		labels[k] = v
	}
	return tableRow{ID: r.id, Alive: !r.dead, IP: r.ip, Hostname: m.nodes[i].Hostname, IsHead: r.head, Resources: res, Labels: labels}
}

// startFlags are the `ray start` flags the provider sets (ray.StartCommand).
type startFlags struct {
	head                          bool
	port, numGPUs                 int
	address, nodeIP, dashboard    string
	resources, labels             string
	disableUsageStats, numGPUsSet bool
}

func parseStart(args []string) (startFlags, error) {
	var f startFlags
	fs := flag.NewFlagSet("ray start", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&f.head, "head", false, "")
	fs.IntVar(&f.port, "port", 6379, "")
	fs.StringVar(&f.address, "address", "", "")
	fs.StringVar(&f.nodeIP, "node-ip-address", "", "")
	fs.IntVar(&f.numGPUs, "num-gpus", -1, "")
	fs.StringVar(&f.resources, "resources", "", "")
	fs.StringVar(&f.labels, "labels", "", "")
	fs.StringVar(&f.dashboard, "dashboard-host", "", "")
	fs.BoolVar(&f.disableUsageStats, "disable-usage-stats", false, "")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	f.numGPUsSet = f.numGPUs >= 0
	return f, nil
}

// start is `ray start` on node i (args: what follows "start"): the head
// serves a GCS at its address and port, a worker joins the GCS it is
// given, which must be up. What it registers is node_ip, else the node's
// fabric address (Ray's detection: the route to 8.8.8.8, or to the head).
func (m *Model) start(i int, args []string) error {
	f, err := parseStart(args)
	if err != nil {
		return err
	}
	n := m.node(i)
	r := &raylet{id: newNodeID(), head: f.head, ip: n.IP.String(), gpus: float64(n.GPUs)}
	if f.nodeIP != "" {
		r.ip = f.nodeIP
	}
	if n.registersAs.IsValid() {
		r.ip = n.registersAs.String()
	}
	if f.numGPUsSet {
		r.gpus = float64(f.numGPUs)
	}
	if err := decodeCustom(f, r); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r.started = time.Now()
	if f.head {
		if h := m.headStart; h.Registers > h.GCSListens {
			r.registers = r.started.Add(h.Registers - h.GCSListens)
		}
		r.gcsPort, r.gcsAddr = f.port, net.JoinHostPort(r.ip, strconv.Itoa(f.port))
		if m.headOf(r.gcsAddr) != nil {
			return fmt.Errorf("GCS port %d is already in use", f.port)
		}
		m.current[i] = r.gcsAddr // Ray records the cluster it started on the head
	} else {
		if m.headOf(f.address) == nil {
			return fmt.Errorf("ConnectionError: could not reach the GCS at %s", f.address)
		}
		r.gcsAddr = f.address
	}
	m.rays[i] = r
	return nil
}

func decodeCustom(f startFlags, r *raylet) error {
	if f.resources != "" {
		if err := json.Unmarshal([]byte(f.resources), &r.resources); err != nil {
			return fmt.Errorf("--resources: %w", err)
		}
	}
	if f.labels != "" {
		if err := json.Unmarshal([]byte(f.labels), &r.labels); err != nil {
			return fmt.Errorf("--labels: %w", err)
		}
	}
	return nil
}

// stop is ray.StopScript on node i ($1 the GCS address, $2 its port, $3 1
// on the head): this cluster's raylet goes, another cluster's stays.
func (m *Model) stop(i int, args []string) error {
	gcsAddr, head := arg(args, 1), arg(args, 3) == "1"
	if gcsAddr == "" {
		return errors.New("no GCS address")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.rays[i]; r != nil && r.gcsAddr == gcsAddr && (head || !r.head) {
		if r.head {
			m.forgetGCS(gcsAddr)
		}
		m.rays[i] = nil
	}
	return nil
}
