package resources

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/inputs"
	"github.com/lab-infra/terraform-provider-spark/internal/providerdata"
)

// targetAddressValidator: the address a copy arrives on is an IP the
// receiver binds.
var targetAddressValidator = providerdata.Checked("Invalid address",
	"the target's IP the copy arrives on, e.g. its fabric address", inputs.Address)

func (r *modelResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	source := providerdata.NodeAccessResourceAttributes("The node that holds the model.", " Changing it replaces the model.", true)
	source["path"] = schema.StringAttribute{Required: true, Validators: []validator.String{providerdata.Path},
		PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
		MarkdownDescription: "The model's directory on the source node: a model as vLLM loads it, or a Hugging Face cache snapshot (`…/hub/models--<org>--<name>/snapshots/<commit>`; its links are followed). Changing it replaces the model."}
	target := providerdata.NodeAccessResourceAttributes("", " Changing it copies the model there and removes this resource's copy from where it was.", false)
	target["address"] = schema.StringAttribute{Required: true, Validators: []validator.String{targetAddressValidator},
		MarkdownDescription: "The target's IP the copy arrives on, e.g. its fabric address: the source node sends to it, and the target listens on it only (never on every address), for this copy's sender only."}
	target["path"] = schema.StringAttribute{Optional: true, Computed: true, Validators: []validator.String{providerdata.Path},
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
				PlanModifiers: []planmodifier.Object{objectplanmodifier.RequiresReplace()}, MarkdownDescription: "Where the model is read."},
			"targets": schema.MapNestedAttribute{Required: true, NestedObject: schema.NestedAttributeObject{Attributes: target},
				MarkdownDescription: "The nodes the model is copied to, by name. Adding one copies the model there; removing one removes this resource's copy from it (unless `keep_on_destroy`)."},
			"python_command": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("python3"),
				Validators:          []validator.String{providerdata.Path},
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
