package transport

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"
)

// What an operator sees with TF_LOG=debug: one line per remote step and per
// connection, with the node, the step's name, how long it took and how it
// ended. Never the command line, stdin or output: argv may carry values an
// operator did not mean to log, stdin carries secrets (environment files,
// tokens, keys), and failures already reach the user, with stderr's tail, in
// the diagnostic.

func logStep(ctx context.Context, node string, cmd Cmd, start time.Time, err *error) {
	fields := map[string]any{
		"node":        node,
		"step":        cmd.Step,
		"duration_ms": time.Since(start).Milliseconds(),
		"exit_status": 0,
		"stdin_bytes": len(cmd.Stdin),
	}
	if *err != nil {
		fields["exit_status"] = ExitStatus(*err)
		if ctx.Err() != nil {
			fields["cancelled"] = context.Cause(ctx).Error()
		}
	}
	tflog.Debug(ctx, "remote step", fields)
}

func logConnect(ctx context.Context, e Endpoint, bastion bool, start time.Time, c **Conn, err *error) {
	fields := map[string]any{
		"node":        e.addr(),
		"user":        e.User,
		"via_bastion": bastion,
		"duration_ms": time.Since(start).Milliseconds(),
	}
	if *err != nil {
		fields["error"] = (*err).Error()
		tflog.Debug(ctx, "ssh connect failed", fields)
		return
	}
	fields["host_key"] = (*c).HostKeyFingerprint()
	tflog.Debug(ctx, "ssh connected", fields)
}
