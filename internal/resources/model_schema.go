package resources

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/inputs"
	"github.com/lab-infra/terraform-provider-spark/internal/schemaparts"
)

// targetAddressValidator: the address a copy arrives on is an IP the
// receiver binds.
var targetAddressValidator = schemaparts.Checked("Invalid address",
	"the target's IP the copy arrives on, e.g. its fabric address", inputs.TargetAddress)

func (r *modelResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	source := schemaparts.NodeAccessResourceAttributes("The node that holds the model, or fetches it from the Hugging Face Hub.", " Changing it replaces the model.", true)
	source["path"] = schema.StringAttribute{Optional: true, Computed: true, Validators: []validator.String{schemaparts.Path},
		PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplaceIfConfigured(), stringplanmodifier.UseStateForUnknown()},
		MarkdownDescription: "The model's directory on the source node: a model as vLLM loads it, or a Hugging Face cache snapshot (`…/hub/models--<org>--<name>/snapshots/<commit>`; its links are followed). With `repository`, the snapshot's directory the Hub's client put it in (computed). Changing it replaces the model."}
	source["repository"] = schema.StringAttribute{Optional: true, Validators: []validator.String{schemaparts.Checked("Invalid repository",
		"a Hugging Face repository id", inputs.HFRepository)},
		PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
		MarkdownDescription: "A Hugging Face repository (`<org>/<name>`) the source node fetches with the Hub's own client (`huggingface_hub.snapshot_download` of `python_command`, which must have it, as Ray's Python with vLLM does), instead of `path`. Each LFS file (the weights) is checked against the SHA-256 the Hub gave it. Changing it replaces the model."}
	source["revision"] = schema.StringAttribute{Optional: true, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
		MarkdownDescription: "With `repository`: a branch, tag or commit. Default: the repository's `main`. The commit it resolved to is in `commit`."}
	source["hub_cache"] = schema.StringAttribute{Optional: true, Validators: []validator.String{schemaparts.Path},
		PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
		MarkdownDescription: "With `repository`: the cache directory (`HF_HUB_CACHE`). Default: the node's (`HF_HUB_CACHE`, else `HF_HOME/hub`, else `~/.cache/huggingface/hub`)."}
	source["offline"] = schema.BoolAttribute{Optional: true,
		MarkdownDescription: "With `repository`: use the cache only (`HF_HUB_OFFLINE=1`), for nodes that cannot reach the Hub and a snapshot already there."}
	source["token_wo"] = schema.StringAttribute{Optional: true, Sensitive: true, WriteOnly: true,
		MarkdownDescription: "With `repository`: a Hugging Face token for gated or private repositories, given to the Hub's client on the node (its standard input, then `HF_TOKEN`). Write-only: never in state or plan (Terraform 1.11+ / OpenTofu 1.11+)."}
	source["commit"] = schema.StringAttribute{Computed: true, PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
		MarkdownDescription: "With `repository`: the commit `revision` resolved to when the model was fetched."}
	target := schemaparts.NodeAccessResourceAttributes("", " Changing it copies the model there and removes this resource's copy from where it was.", false)
	target["address"] = schema.StringAttribute{Required: true, Validators: []validator.String{targetAddressValidator},
		MarkdownDescription: "The target's IP the copy arrives on, e.g. its fabric address: the source node sends to it, and the target listens on it only (never on every address), for this copy's sender only."}
	target["path"] = schema.StringAttribute{Optional: true, Computed: true, Validators: []validator.String{schemaparts.Path},
		MarkdownDescription: "Where the model goes on the target. Default: the source's `path`."}
	target["missing"] = schema.ListAttribute{Computed: true, ElementType: types.StringType,
		MarkdownDescription: "The model's files this target lacks, or holds with another size, as the last refresh found them; the apply copies them again. Empty after every apply."}
	target["copied"] = schema.ListAttribute{Computed: true, ElementType: types.StringType,
		MarkdownDescription: "The files this resource copied to the target: what a destroy removes. Files the target held already are not counted."}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A model's files on every node that loads it: read from a directory on one node, copied from that node to each target over the address given (the fabric), never through the machine running Terraform, each file verified by its SHA-256. A refresh lists each target's files by name and size, and a file missing or changed there is drift, named in the plan and repaired by the apply.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "`<source ssh_host>:<source path>`.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"source": schema.SingleNestedAttribute{Required: true, Attributes: source,
				MarkdownDescription: "Where the model is read: a directory on a node (`path`), or a Hugging Face repository fetched there (`repository`)."},
			"targets": schema.MapNestedAttribute{Required: true, NestedObject: schema.NestedAttributeObject{Attributes: target},
				MarkdownDescription: "The nodes the model is copied to, by name. Adding one copies the model there; removing one removes this resource's copy from it (unless `keep_on_destroy`)."},
			"python_command": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("python3"),
				Validators:          []validator.String{schemaparts.Path},
				MarkdownDescription: "The Python that runs the listing, hashing and copy on every node (standard library only). Default: `python3`."},
			"verify": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("size"),
				Validators:          []validator.String{stringvalidator.OneOf("size", "sha256")},
				MarkdownDescription: "What a refresh compares on each target: `size` (names and sizes: milliseconds, whatever the model's size) or `sha256` (every byte read and hashed: a file changed in place, at its size, shows too; minutes for a large model). Default: `size`. A copy is always checked by SHA-256."},
			"keep_on_destroy": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				MarkdownDescription: "Keep the copies on the targets when the resource (or a target) is removed. Default: false, they are removed; the source is never touched."},
			"files": schema.MapNestedAttribute{Computed: true, NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"size":   schema.Int64Attribute{Computed: true, MarkdownDescription: "Bytes."},
				"sha256": schema.StringAttribute{Computed: true, MarkdownDescription: "SHA-256, hex; empty while the source changed since the last copy."},
			}}, MarkdownDescription: "The manifest: every file of the model by its path below the directory, as read at the source."},
			"total_bytes": schema.Int64Attribute{Computed: true, MarkdownDescription: "The model's size."},
			"timeouts":    timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true, Delete: true}),
		},
	}
}
