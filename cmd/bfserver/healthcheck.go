package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// healthcheck is `bfserver healthcheck [URL]`: a probe for images that
// have no curl (distroless, scratch). It GETs the URL, by default
// /readyz on the address in BFSERVER_HTTP_ADDR (the server's --http-addr
// as an environment variable, which a container's HEALTHCHECK inherits),
// with 0.0.0.0 or [::] read as loopback. Exit 0 on a 2xx answer within
// the timeout, 1 otherwise.
func healthcheck(args []string, stderr io.Writer) int {
	url := ""
	if len(args) > 0 {
		url = args[0]
	} else {
		addr := os.Getenv("BFSERVER_HTTP_ADDR")
		if addr == "" {
			fmt.Fprintln(stderr, "healthcheck: give a URL, or set BFSERVER_HTTP_ADDR")
			return 1
		}
		url = "http://" + loopbackFor(addr) + "/readyz"
	}
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	client := &http.Client{Timeout: 3 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		fmt.Fprintln(stderr, "healthcheck:", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		fmt.Fprintf(stderr, "healthcheck: %s: %s %s\n", url, resp.Status, strings.TrimSpace(string(body)))
		return 1
	}
	return 0
}

// loopbackFor turns a listen address into one to dial: an unspecified or
// empty host becomes 127.0.0.1.
func loopbackFor(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
