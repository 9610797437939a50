package providerdata

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// Terraform calls a resource's Configure before the provider's (nil data:
// nothing to say yet), then with the provider's data; anything else is a
// bug, said as one.
func TestFrom(t *testing.T) {
	if d, diags := From(nil); d != nil || diags.HasError() {
		t.Errorf("nil: %v, %v; want nothing and no error", d, diags)
	}
	in := &Data{}
	if d, diags := From(in); d != in || diags.HasError() {
		t.Errorf("the provider's data: %v, %v", d, diags)
	}
	d, diags := From("not the data")
	if d != nil || !diags.HasError() || !strings.Contains(diags[0].Detail(), "got string") {
		t.Errorf("another type: %v, %v; want an error naming the type", d, diags)
	}
}

// A read cut off by the deadline says why (transport reports the cause),
// and the deadline is the one documented.
func TestWithReadDeadline(t *testing.T) {
	ctx, cancel := WithReadDeadline(context.Background())
	defer cancel()
	dl, ok := ctx.Deadline()
	if left := time.Until(dl); !ok || left > ReadDeadline || left < ReadDeadline-time.Minute {
		t.Fatalf("deadline in %v, want about %v", left, ReadDeadline)
	}
	short, stop := context.WithTimeout(context.Background(), time.Millisecond)
	defer stop()
	ctx, cancel = WithReadDeadline(short) // a shorter deadline of the caller's still wins
	defer cancel()
	<-ctx.Done()
	if cause := context.Cause(ctx); !errors.Is(cause, context.DeadlineExceeded) {
		t.Errorf("cut off by the caller's deadline: cause %v", cause)
	}
}
