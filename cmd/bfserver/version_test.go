package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
)

// TestVersion: --version, -version and version print the version lines
// and the Go version; other arguments are left to the server.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "-version", "version"} {
		var out bytes.Buffer
		code, ok := subcommand([]string{arg}, &out, io.Discard)
		if !ok || code != 0 {
			t.Fatalf("%s: handled %v, code %d", arg, ok, code)
		}
		s := out.String()
		for _, want := range []string{"bfserver ", "\ncommit ", "\nbuilt ", runtime.Version()} {
			if !strings.Contains(s, want) {
				t.Fatalf("%s printed %q, no %q", arg, s, want)
			}
		}
	}
	if _, ok := subcommand([]string{"--addr", "x"}, io.Discard, io.Discard); ok {
		t.Fatal("server flags taken as a subcommand")
	}
	if _, ok := subcommand(nil, io.Discard, io.Discard); ok {
		t.Fatal("no arguments taken as a subcommand")
	}
}

// TestHealthcheck: exit 0 on a 2xx, 1 on a 503 or no answer; without a
// URL the address comes from BFSERVER_HTTP_ADDR, 0.0.0.0 read as loopback.
func TestHealthcheck(t *testing.T) {
	ready := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" || !ready {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	if code := healthcheck([]string{srv.URL + "/readyz"}, io.Discard); code != 0 {
		t.Fatalf("ready: exit %d", code)
	}
	port := srv.Listener.Addr().String()[strings.LastIndex(srv.Listener.Addr().String(), ":"):]
	t.Setenv("BFSERVER_HTTP_ADDR", "0.0.0.0"+port)
	if code, _ := subcommand([]string{"healthcheck"}, io.Discard, io.Discard); code != 0 {
		t.Fatalf("from BFSERVER_HTTP_ADDR: exit %d", code)
	}
	ready = false
	var errOut bytes.Buffer
	if code := healthcheck(nil, &errOut); code != 1 || !strings.Contains(errOut.String(), "503") {
		t.Fatalf("not ready: exit %d, %q", code, errOut.String())
	}
	srv.Close()
	if code := healthcheck([]string{srv.URL + "/readyz"}, io.Discard); code != 1 {
		t.Fatalf("server gone: exit %d", code)
	}
	if got := loopbackFor("[::]:9121"); got != "127.0.0.1:9121" {
		t.Fatalf("loopbackFor([::]:9121) = %s", got)
	}
	if got := loopbackFor("10.1.2.3:9121"); got != "10.1.2.3:9121" {
		t.Fatalf("loopbackFor(10.1.2.3:9121) = %s", got)
	}
}
