package vllm

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-log/tflog"
)

// httpLog sends go-retryablehttp's log lines (each request, each retry) to
// the provider's log. retryablehttp logs method and URL only, never headers,
// so the API key in Authorization stays out.
type httpLog struct{ ctx context.Context }

func (l httpLog) fields(kv []any) map[string]any {
	f := map[string]any{"subsystem": "retryablehttp"}
	for i := 0; i+1 < len(kv); i += 2 {
		f[fmt.Sprint(kv[i])] = fmt.Sprint(kv[i+1])
	}
	return f
}

func (l httpLog) Error(msg string, kv ...any) { tflog.Error(l.ctx, msg, l.fields(kv)) }
func (l httpLog) Warn(msg string, kv ...any)  { tflog.Warn(l.ctx, msg, l.fields(kv)) }
func (l httpLog) Info(msg string, kv ...any)  { tflog.Info(l.ctx, msg, l.fields(kv)) }
func (l httpLog) Debug(msg string, kv ...any) { tflog.Debug(l.ctx, msg, l.fields(kv)) }
