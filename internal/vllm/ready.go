package vllm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/hashicorp/terraform-plugin-log/tflog"
)

// Readiness is what WaitReady needs.
type Readiness struct {
	BaseURL    string // http://127.0.0.1:<port>, reached through the SSH tunnel
	ServedName string
	APIKey     string // never logged
	Transport  http.RoundTripper
	Logger     retryablehttp.LeveledLogger
	// Alive reports whether the server process still runs; a process that
	// died makes waiting pointless.
	Alive func(context.Context) (bool, error)
}

// NotReadyError says why the server is not ready yet; the last one is
// returned when ctx ends.
type NotReadyError struct{ Stage, Detail string }

func (e *NotReadyError) Error() string { return e.Stage + ": " + e.Detail }

// WaitReady polls until the server is ready: /health answers 200, the
// served name is in /v1/models, and one 1-token completion comes back (a
// 200 on /health alone is not ready: the model may not be loaded).
func WaitReady(ctx context.Context, r Readiness) error {
	c := retryablehttp.NewClient()
	c.HTTPClient = &http.Client{Transport: r.Transport, Timeout: 30 * time.Second}
	c.Logger = r.Logger
	if r.Logger == nil {
		c.Logger = httpLog{ctx}
	}
	c.RetryMax = 2
	c.RetryWaitMin, c.RetryWaitMax = 200*time.Millisecond, 2*time.Second
	c.ErrorHandler = retryablehttp.PassthroughErrorHandler
	var last error = &NotReadyError{Stage: "waiting", Detail: "no answer yet"}
	// Poll soon, then back off to every 2 s: a small model is up in seconds,
	// a 120B one takes many minutes. A probe of a server still loading is a
	// refused connect or one /health answer, nothing it notices; a longer
	// wait would cost every start half of it on average (1 s here).
	wait := 500 * time.Millisecond
	for {
		if r.Alive != nil {
			if alive, err := r.Alive(ctx); err == nil && !alive {
				return fmt.Errorf("the vLLM process exited (last state: %w)", last)
			}
		}
		err := probe(ctx, c, r)
		if err == nil {
			return nil
		}
		tflog.Debug(ctx, "vLLM not ready yet", map[string]any{"stage": err.Stage, "detail": err.Detail})
		last = err
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				return fmt.Errorf("the apply was interrupted while the model loaded: %w", last)
			}
			return fmt.Errorf("not ready when the timeout ended: %w", last)
		case <-time.After(wait):
		}
		wait = min(wait*2, 2*time.Second)
	}
}

func probe(ctx context.Context, c *retryablehttp.Client, r Readiness) *NotReadyError {
	do := func(method, path string, body any) (int, []byte, error) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, err := retryablehttp.NewRequestWithContext(ctx, method, r.BaseURL+path, rd)
		if err != nil {
			return 0, nil, err
		}
		if r.APIKey != "" {
			req.Header.Set("Authorization", "Bearer "+r.APIKey)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, b, nil
	}
	code, _, err := do(http.MethodGet, "/health", nil)
	if err != nil || code != http.StatusOK {
		return &NotReadyError{Stage: "/health", Detail: statusText(code, err)}
	}
	code, b, err := do(http.MethodGet, "/v1/models", nil)
	if err != nil || code != http.StatusOK {
		return &NotReadyError{Stage: "/v1/models", Detail: statusText(code, err)}
	}
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	_ = json.Unmarshal(b, &models)
	var ids []string
	for _, m := range models.Data {
		ids = append(ids, m.ID)
	}
	if !slices.Contains(ids, r.ServedName) {
		return &NotReadyError{Stage: "/v1/models", Detail: fmt.Sprintf("serves [%s], not %q", strings.Join(ids, ", "), r.ServedName)}
	}
	code, b, err = do(http.MethodPost, "/v1/completions", map[string]any{"model": r.ServedName, "prompt": "ping", "max_tokens": 1})
	if err != nil || code != http.StatusOK {
		return &NotReadyError{Stage: "1-token completion", Detail: statusText(code, err) + " " + string(bytes.TrimSpace(b))}
	}
	return nil
}

func statusText(code int, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("HTTP %d", code)
}
