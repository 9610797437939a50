// Package schemaparts holds what the resources' and data sources' schemas share:
// the node access attributes (SSH host, port, user, host key) with their
// model, and the validators that run at `terraform validate` (over the
// pure checks of internal/inputs).
package schemaparts

import (
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// NodeAccess is how the provider reaches one node: the host plus per-node
// overrides of the provider's ssh settings.
type NodeAccess struct {
	SSHHost types.String `tfsdk:"ssh_host"`
	SSHPort types.Int64  `tfsdk:"ssh_port"`
	SSHUser types.String `tfsdk:"ssh_user"`
	HostKey types.String `tfsdk:"host_key"`
}

// Endpoint turns the model into a transport endpoint; zero values fall back
// to the provider's ssh settings.
func (n NodeAccess) Endpoint() transport.Endpoint {
	return transport.Endpoint{
		Host:    n.SSHHost.ValueString(),
		Port:    int(n.SSHPort.ValueInt64()),
		User:    n.SSHUser.ValueString(),
		HostKey: n.HostKey.ValueString(),
	}
}

// The node-access attributes, described once for every schema that has
// them (both resources and the spark_node data source).
const (
	sshHostDoc = "Address the provider connects to over SSH (the node's external, operator-reachable address)."
	sshPortDoc = "SSH port for this node. Default: the provider's `ssh.port`."
	sshUserDoc = "SSH user for this node. Default: the provider's `ssh.user`."
	hostKeyDoc = "Pins this node's SSH host key: an authorized_keys-style line such as the content of " +
		"`/etc/ssh/ssh_host_ed25519_key.pub`. Wins over `known_hosts_file` and `host_key_policy`."
)

var (
	sshHostValidators = []validator.String{stringvalidator.LengthAtLeast(1)}
	sshPortValidators = []validator.Int64{int64validator.Between(1, 65535)}
	sshUserValidators = []validator.String{NotBlank("ssh_user", "an SSH user")}
	hostKeyValidators = []validator.String{HostKey}
)

// NodeAccessDataSourceAttributes are the node access attributes as they
// appear in a data source's schema.
func NodeAccessDataSourceAttributes() map[string]dschema.Attribute {
	return map[string]dschema.Attribute{
		"ssh_host": dschema.StringAttribute{Required: true, MarkdownDescription: sshHostDoc, Validators: sshHostValidators},
		"ssh_port": dschema.Int64Attribute{Optional: true, MarkdownDescription: sshPortDoc, Validators: sshPortValidators},
		"ssh_user": dschema.StringAttribute{Optional: true, MarkdownDescription: sshUserDoc, Validators: sshUserValidators},
		"host_key": dschema.StringAttribute{Optional: true, MarkdownDescription: hostKeyDoc, Validators: hostKeyValidators},
	}
}

// NodeAccessResourceAttributes are the same attributes in a resource's
// schema. hostDoc replaces ssh_host's description when not empty; onChange
// says what changing where or as whom the node is reached does (ssh_host,
// ssh_port, ssh_user: another port may be another machine behind one
// address, and another user runs other processes, which the first user's
// cannot be stopped by); replace makes those three replace the resource.
// host_key only checks the node, so changing it restarts nothing.
func NodeAccessResourceAttributes(hostDoc, onChange string, replace bool) map[string]rschema.Attribute {
	if hostDoc == "" {
		hostDoc = sshHostDoc
	}
	var hostMods, userMods []planmodifier.String
	var portMods []planmodifier.Int64
	if replace {
		hostMods, userMods = []planmodifier.String{stringplanmodifier.RequiresReplace()}, []planmodifier.String{stringplanmodifier.RequiresReplace()}
		portMods = []planmodifier.Int64{int64planmodifier.RequiresReplace()}
	}
	return map[string]rschema.Attribute{
		"ssh_host": rschema.StringAttribute{Required: true, MarkdownDescription: hostDoc + onChange,
			Validators: sshHostValidators, PlanModifiers: hostMods},
		"ssh_port": rschema.Int64Attribute{Optional: true, MarkdownDescription: sshPortDoc + onChange, Validators: sshPortValidators,
			PlanModifiers: portMods},
		"ssh_user": rschema.StringAttribute{Optional: true, MarkdownDescription: sshUserDoc + " The processes run as this user." + onChange,
			Validators: sshUserValidators, PlanModifiers: userMods},
		"host_key": rschema.StringAttribute{Optional: true, MarkdownDescription: hostKeyDoc + " Changing it restarts nothing.",
			Validators: hostKeyValidators},
	}
}
