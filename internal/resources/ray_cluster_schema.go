package resources

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/inputs"
	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
	"github.com/lab-infra/terraform-provider-spark/internal/schemaparts"
)

// nodeIPValidator is the config-time node_ip check (rule D4).
var nodeIPValidator = schemaparts.StringCheck{Desc: "a literal IP address, not loopback, not a hostname", Summary: "Invalid node_ip",
	Check: func(p, v string) error {
		if err := inputs.NodeIP(v); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		return nil
	}, Cite: preflight.D4.Cite()}

func nodeAttributes(head bool) map[string]schema.Attribute {
	replace := func(desc string) string {
		if head {
			return desc + " Changing it replaces the cluster."
		}
		return desc + " Changing it restarts Ray on this worker only."
	}
	headReplaceInt := []planmodifier.Int64{}
	headReplaceMap := []planmodifier.Map{}
	headReplaceString := []planmodifier.String{}
	if head {
		headReplaceInt = append(headReplaceInt, int64planmodifier.RequiresReplaceIfConfigured())
		headReplaceMap = append(headReplaceMap, mapplanmodifier.RequiresReplaceIfConfigured())
		headReplaceString = append(headReplaceString, stringplanmodifier.RequiresReplaceIf(replaceStringUnlessImported,
			"Replaces the cluster when changed.", "Replaces the cluster when changed."))
	}
	attrs := schemaparts.NodeAccessResourceAttributes("", replace(""), head)
	for k, a := range map[string]schema.Attribute{
		"node_ip": schema.StringAttribute{Optional: true, Validators: []validator.String{nodeIPValidator},
			MarkdownDescription: replace("`--node-ip-address`: the IP Ray registers for this node (`node:<ip>`). Must be a literal IP bound " +
				"on the node. Null: Ray detects it (head: the route to 8.8.8.8; worker: the route to the head), and the plan shows " +
				"what it will detect. Setting it to the address Ray already registered changes nothing on the node.")},
		"num_gpus": schema.Int64Attribute{Optional: true, Computed: true, PlanModifiers: headReplaceInt,
			Validators:          []validator.Int64{int64validator.AtLeast(0)},
			MarkdownDescription: replace("`--num-gpus`. Null: Ray counts them; the state then holds what Ray registered.")},
		"resources": schema.MapAttribute{Optional: true, Computed: true, ElementType: types.Float64Type, PlanModifiers: headReplaceMap,
			Validators: []validator.Map{schemaparts.RayResources},
			MarkdownDescription: replace("Custom Ray resources (`--resources`), e.g. `{ \"spark.head\" = 1 }`: whole quantities of at least 0, not " +
				"named like Ray's own (`CPU`, `GPU`, `memory`, `object_store_memory`), as `ray start` requires.")},
		"labels": schema.MapAttribute{Optional: true, Computed: true, ElementType: types.StringType, PlanModifiers: headReplaceMap,
			Validators:          []validator.Map{schemaparts.RayLabels},
			MarkdownDescription: replace("Ray node labels (`--labels`), keys and values in the form `ray start` accepts; `ray.io/` keys are Ray's own.")},
		"interface": schema.StringAttribute{Optional: true, PlanModifiers: headReplaceString,
			Validators: []validator.String{schemaparts.InterfaceName},
			MarkdownDescription: replace("This node's fabric port (e.g. `enp1s0f1np1`), given to its Ray as `NCCL_SOCKET_IFNAME` and " +
				"`GLOO_SOCKET_IFNAME`: two Sparks cabled on different ports name them differently, and one value in `env` cannot " +
				"fit both. vLLM's worker actors on the node inherit it; RayExecutorV2 does not overwrite it with vllm serve's " +
				"(it fills in only what a worker lacks). Checked at plan: it must exist on the node, be up and carry the address " +
				"Ray registers for it. Not with the same variables in `env`.")},
		"registered_ip": schema.StringAttribute{Computed: true,
			MarkdownDescription: "The IP Ray registered for this node (`NodeManagerAddress`, resource `node:<ip>`). Planned as a known " +
				"value: `node_ip`, else Ray's own detection run on the node."},
		"node_id": schema.StringAttribute{Computed: true, MarkdownDescription: "Ray's node ID."},
		"alive":   schema.BoolAttribute{Computed: true, MarkdownDescription: "Alive in Ray's node table at the last read."},
	} {
		attrs[k] = a
	}
	return attrs
}

func (r *rayClusterResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	probe, gbps := fabricProbeAttributes(probeWords{from: "the head", to: "each worker", between: "the addresses Ray registers",
		each: "worker", what: "cluster", changed: "its workers"})
	resp.Schema = schema.Schema{
		MarkdownDescription: "A Ray cluster — a head and workers — started over SSH. The plan reads every node first and predicts " +
			"the IP Ray will register for each; a `node_ip` not bound on its node, a worker that cannot reach the head over a " +
			"shared network, differing Ray or Python versions, interface names that do not carry a node's Ray address, more " +
			"GPUs than a node has, or a GCS port held by another Ray are errors before anything starts.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "The head's `ssh_host`.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"head": schema.SingleNestedAttribute{Required: true, Attributes: nodeAttributes(true),
				MarkdownDescription: "The head node: runs the GCS that workers join."},
			"workers": schema.MapNestedAttribute{Optional: true,
				Validators:   []validator.Map{mapvalidator.KeysAre(schemaparts.WorkerName)},
				NestedObject: schema.NestedAttributeObject{Attributes: nodeAttributes(false)},
				MarkdownDescription: "Worker nodes, keyed by a stable name (letters, digits, `.`, `_`, `-`; not `head`): adding or removing one " +
					"never touches the others or the head."},
			"runtime": runtimeAttribute(),
			"gcs_port": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(6379),
				PlanModifiers:       []planmodifier.Int64{int64planmodifier.RequiresReplace()},
				Validators:          []validator.Int64{int64validator.Between(1, 65535)},
				MarkdownDescription: "The head's GCS port (`ray start --head --port`). Default: 6379."},
			"env": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				Validators: []validator.Map{schemaparts.PlainEnv},
				PlanModifiers: []planmodifier.Map{mapplanmodifier.RequiresReplaceIf(replaceMapUnlessImported,
					"Replaces the cluster when changed.", "Replaces the cluster when changed.")},
				MarkdownDescription: "Environment for Ray on every node (e.g. `NCCL_SOCKET_IFNAME`, `GLOO_SOCKET_IFNAME`). Interface names " +
					"in `NCCL_SOCKET_IFNAME`, `GLOO_SOCKET_IFNAME`, `TP_SOCKET_IFNAME`, `UCX_NET_DEVICES` are checked at plan on every node. " +
					"Each node's Ray also gets `VLLM_HOST_IP` = the address Ray registers for that node (vLLM's worker actors read it " +
					"there); setting `VLLM_HOST_IP` here is refused unless it matches every node. Stored in state: names that hold " +
					"secrets (`*_TOKEN`, `*_API_KEY`, `*_SECRET`, `*_PASSWORD`, ...) are refused here; give them in `secret_env_wo`."},
			"secret_env_wo": schema.MapAttribute{Optional: true, Sensitive: true, WriteOnly: true, ElementType: types.StringType,
				Validators: []validator.Map{schemaparts.Env},
				MarkdownDescription: "Secret environment for Ray on every node (a token Ray jobs need), added to `env`. Write-only " +
					"(Terraform/OpenTofu 1.11+): it travels on `ray start`'s stdin into the Ray processes' environment, never to state, " +
					"plan, argv or logs. Change `secret_env_wo_version` to restart the cluster with new values. vLLM's `HF_TOKEN` " +
					"belongs in the deployment's `secret_env_wo`: vLLM copies `HF_*` variables to its Ray workers " +
					"(vLLM 0.32.0 `vllm/ray/ray_env.py`)."},
			"secret_env_wo_version": schema.Int64Attribute{Optional: true,
				PlanModifiers:       []planmodifier.Int64{int64planmodifier.RequiresReplace()},
				MarkdownDescription: "Change to restart the cluster with a new `secret_env_wo`. Replaces the cluster."},
			"start_args": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				Validators: []validator.List{listvalidator.ValueStringsAre(schemaparts.RayStartArg)},
				PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplaceIf(replaceListUnlessImported,
					"Replaces the cluster when changed.", "Replaces the cluster when changed.")},
				MarkdownDescription: "Extra `ray start` arguments for every node, each passed as one quoted argument. Flags the provider " +
					"sets (`--head`, `--address`, `--port`, `--node-ip-address`, `--num-gpus`, `--resources`, `--labels`, " +
					"`--dashboard-host`) and `--block` are refused: use the attributes."},
			"dashboard_host": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("127.0.0.1"),
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:          []validator.String{schemaparts.Address},
				MarkdownDescription: "`--dashboard-host`. Default `127.0.0.1`; `0.0.0.0` exposes the dashboard (and job submission) to the network, with a plan warning."},
			"auth_mode": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("token"),
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:    []validator.String{stringvalidator.OneOf("token", "disabled")},
				MarkdownDescription: "`token` (default): Ray's token authentication (`RAY_AUTH_MODE=token`, Ray 2.52+). The head keeps the " +
					"token it has at Ray's default path `~/.ray/auth_token` or gets a random one; every worker gets the same token in a " +
					"0600 file. The token never reaches state, plan or argv; `ray` run by hand on a node finds it. `disabled`: anyone " +
					"who reaches the GCS or dashboard can run code on every node."},
			"fabric_probe": probe,
			"fabric_gbps":  gbps,
			"head_address": schema.StringAttribute{Computed: true, MarkdownDescription: "`<head registered ip>:<gcs_port>`: the address workers (and vLLM's `ray_address`) join."},
			"ray_version":  schema.StringAttribute{Computed: true, MarkdownDescription: "Ray version running on the cluster."},
			"timeouts":     timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true, Delete: true}),
		},
	}
}
