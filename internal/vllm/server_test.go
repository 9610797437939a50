package vllm

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// What one /health answer means: 200 serves; another status or a refused
// port is unhealthy; no answer in time is a busy server, which the plan
// must not restart.
func TestHealthOf(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
		case "/slow":
			<-release
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	defer close(release)
	c := &http.Client{Timeout: 100 * time.Millisecond}
	refused := httptest.NewServer(http.NotFoundHandler())
	refusedURL := refused.URL
	refused.Close()
	for _, tc := range []struct {
		url  string
		want Health
	}{
		{srv.URL + "/ok", HealthOK},
		{srv.URL + "/unavailable", HealthBad},
		{srv.URL + "/slow", HealthSlow},
		{refusedURL + "/health", HealthBad},
	} {
		if got := healthOf(c.Get(tc.url)); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.url, got, tc.want)
		}
	}
}
