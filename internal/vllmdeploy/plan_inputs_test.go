package vllmdeploy

import (
	"context"
	"maps"
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/nodeexec"
	"github.com/lab-infra/terraform-provider-spark/internal/planmemo"
	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// The weights rule (D20) lists a model on the nodes only where vLLM reads
// it from the node's disk: a local directory, or a Hub snapshot with the
// Hub offline (huggingface_hub's truthy values); a model each node
// downloads is not checked.
func TestModelSource(t *testing.T) {
	for _, c := range []struct {
		model, offline string
		dir, repo      string
	}{
		{"/models/qwen", "", "/models/qwen", ""},
		{"/models/qwen", "1", "/models/qwen", ""},
		{"Qwen/Qwen2.5-0.5B", "", "", ""},
		{"Qwen/Qwen2.5-0.5B", "0", "", ""},
		{"Qwen/Qwen2.5-0.5B", "1", "", "Qwen/Qwen2.5-0.5B"},
		{"Qwen/Qwen2.5-0.5B", "yes", "", "Qwen/Qwen2.5-0.5B"},
		{"Qwen/Qwen2.5-0.5B", "On", "", "Qwen/Qwen2.5-0.5B"},
		{"Qwen/Qwen2.5-0.5B", "TRUE", "", "Qwen/Qwen2.5-0.5B"},
		{"Qwen--bad/x", "1", "", ""}, // not a repository id: nothing to list
		{"relative/dir/../x", "1", "", ""},
	} {
		s := Spec{Model: c.model, Env: map[string]string{}}
		if c.offline != "" {
			s.Env["HF_HUB_OFFLINE"] = c.offline
		}
		if dir, repo := modelSource(s); dir != c.dir || repo != c.repo {
			t.Errorf("model %q, HF_HUB_OFFLINE=%q: (%q, %q), want (%q, %q)", c.model, c.offline, dir, repo, c.dir, c.repo)
		}
	}
}

// The cache and revision vLLM loads a snapshot from: HF_HUB_CACHE before
// HF_HOME/hub, --revision in either of argparse's spellings.
func TestHubAndRevision(t *testing.T) {
	for _, c := range []struct {
		env           map[string]string
		args          []string
		hub, revision string
	}{
		{nil, nil, "", ""},
		{map[string]string{"HF_HOME": "/data/hf"}, nil, "/data/hf/hub", ""},
		{map[string]string{"HF_HOME": "/data/hf", "HF_HUB_CACHE": "/cache"}, nil, "/cache", ""},
		{nil, []string{"--revision", "abc123"}, "", "abc123"},
		{nil, []string{"--dtype", "half", "--revision=v2"}, "", "v2"},
		{nil, []string{"--revision"}, "", ""}, // no value: vLLM refuses it; nothing read here
	} {
		hub, rev := hubAndRevision(Spec{Env: c.env, ExtraArgs: c.args})
		if hub != c.hub || rev != c.revision {
			t.Errorf("env %v args %v: (%q, %q), want (%q, %q)", c.env, c.args, hub, rev, c.hub, c.revision)
		}
	}
}

// A planned node takes the GPUs Ray registered for it where the cluster
// runs; a node not (or no longer) alive keeps its planned count.
func TestWithLiveGPUs(t *testing.T) {
	planned := []preflight.ClusterNode{{IP: "10.0.0.1", GPUs: 1}, {IP: "10.0.0.2", GPUs: 1}, {IP: "10.0.0.3", GPUs: -1}}
	if got := withLiveGPUs(planned, nil); len(got) != 3 || got[0].GPUs != 1 || got[2].GPUs != -1 {
		t.Errorf("no table: %v, want the plan's", got)
	}
	table := &ray.Table{Nodes: []ray.Node{
		{IP: "10.0.0.1", Alive: true, Resources: map[string]float64{"GPU": 2}},
		{IP: "10.0.0.2", Alive: false, Resources: map[string]float64{"GPU": 4}},
		{IP: "10.0.0.3", Alive: true, Resources: map[string]float64{"CPU": 8}},
	}}
	got := withLiveGPUs(planned, table)
	if got[0].GPUs != 2 || got[1].GPUs != 1 || got[2].GPUs != 0 {
		t.Errorf("with the live table: GPUs %v %v %v, want 2 (registered), 1 (dead: planned), 0 (registered none)", got[0].GPUs, got[1].GPUs, got[2].GPUs)
	}
	if planned[0].GPUs != 1 {
		t.Error("the plan's nodes were changed in place")
	}
}

// A deployment on a cluster planned in the same run takes the cluster's
// runtime, env, nodes and planned GPUs; its model's files come from the
// spark_model planned in the same run, with no command on any node (the
// manager has no pool: a command would fail the test).
func TestAddPlannedClusterReadsTheRunsPlans(t *testing.T) {
	memo := &planmemo.Memo{}
	files := map[string]int64{"config.json": 10, "model.safetensors": 1 << 20}
	memo.PutModel("spark1", "/models/m", files)
	m := &Manager{Memo: memo}
	head := preflight.ClusterNode{Node: preflight.Node{Name: raycluster.HeadName}, IP: "10.0.0.1", GPUs: 1}
	pc := planmemo.Cluster{GPUs: &preflight.PlannedGPUs{Total: 1}, Runtime: nodeexec.Runtime{Container: &nodeexec.Container{Name: "ray-node-6379"}},
		Nodes: []preflight.ClusterNode{head}, Endpoints: map[string]transport.Endpoint{raycluster.HeadName: {Host: "spark1"}},
		Env: map[string]string{"NCCL_SOCKET_IFNAME": "fab0"}}

	dep := preflight.Deployment{}
	s := Spec{Model: "/models/m", TP: 1, PP: 1}
	if err := m.addPlannedCluster(context.Background(), s, pc, preflight.ServeSite{}, &dep); err != nil {
		t.Fatal(err)
	}
	if !dep.ClusterInRun || dep.Site == nil || dep.Planned != pc.GPUs || !maps.Equal(dep.ClusterEnv, pc.Env) || len(dep.Nodes) != 1 {
		t.Fatalf("the cluster's plan is not the deployment's: %+v", dep)
	}
	l, ok := dep.Listings[raycluster.HeadName]
	if !ok || l.Dir != "/models/m" || !maps.Equal(l.Files, files) {
		t.Errorf("listings = %v, want the planned model's files on the head", dep.Listings)
	}

	// A model each node downloads: nothing listed.
	dep = preflight.Deployment{}
	if err := m.addPlannedCluster(context.Background(), Spec{Model: "Qwen/Qwen2.5-0.5B", TP: 1, PP: 1}, pc, preflight.ServeSite{}, &dep); err != nil || dep.Listings != nil {
		t.Errorf("a downloaded model: listings %v, err %v; want none", dep.Listings, err)
	}
}
