package integration

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The packaging under deploy/, the Makefile and the Dockerfile, checked
// as far as this machine can: no Docker engine or Kubernetes cluster runs
// here, so the manifests are parsed and their invariants checked, the
// init script is run, and the binary and its subcommands are run as the
// image and the unit would run them.

const repo = ".."

// yamlDocs parses every document of the YAML files in dir.
func yamlDocs(t *testing.T, dir string) map[string][]map[string]any {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) == 0 {
		t.Fatalf("no YAML in %s", dir)
	}
	out := map[string][]map[string]any{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var doc map[string]any
			if err := dec.Decode(&doc); err != nil {
				if err.Error() == "EOF" {
					break
				}
				t.Fatalf("%s: %v", f, err)
			}
			if doc != nil {
				out[filepath.Base(f)] = append(out[filepath.Base(f)], doc)
			}
		}
	}
	return out
}

// dig walks maps and lists: a string is a map key, an int a list index.
func dig(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch p := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("no %q in %v", p, v)
			}
			v = m[p]
		case int:
			l, ok := v.([]any)
			if !ok || p >= len(l) {
				t.Fatalf("no [%d] in %v", p, v)
			}
			v = l[p]
		}
	}
	return v
}

func str(t *testing.T, v any, path ...any) string {
	t.Helper()
	s, _ := dig(t, v, path...).(string)
	return s
}

// named finds the element of a list of maps whose "name" is name.
func named(t *testing.T, list any, name string) map[string]any {
	t.Helper()
	l, _ := list.([]any)
	for _, e := range l {
		if m, ok := e.(map[string]any); ok && m["name"] == name {
			return m
		}
	}
	t.Fatalf("no %q in %v", name, list)
	return nil
}

// TestDeployKubernetes: the manifests in deploy/kubernetes parse and keep
// the cluster's invariants: a 3-replica StatefulSet whose serviceName is a
// headless Service that publishes not-ready pods; a client Service; the
// node id from the pod name and the advertised address from the pod's
// stable DNS name (bfserver has no separate advertise address, so not
// 0.0.0.0); readiness on /readyz and liveness on /healthz at the config's
// HTTP port; the password and the cluster secret from a Secret (a pod
// off loopback does not start without a cluster secret or cluster TLS);
// a PodDisruptionBudget of maxUnavailable 1 over the pods' labels; a volumeClaimTemplate mounted where the config's data-dir is.
// Then it runs the init container's script: pod 1 and 2 join through
// bfserver-0.bfserver-peers.NS.svc.cluster.local:6379, pod 0 bootstraps on
// an empty disk, joins pod 1 when it has data, and joins a live peer when
// its disk was lost.
func TestDeployKubernetes(t *testing.T) {
	dir := filepath.Join(repo, "deploy", "kubernetes")
	docs := yamlDocs(t, dir)
	byKind := map[string][]map[string]any{}
	for _, ds := range docs {
		for _, d := range ds {
			kind, _ := d["kind"].(string)
			byKind[kind] = append(byKind[kind], d)
		}
	}
	// kustomization.yaml lists every other file.
	kust := docs["kustomization.yaml"][0]
	for f := range docs {
		if f != "kustomization.yaml" && !slices.Contains(dig(t, kust, "resources").([]any), any(f)) {
			t.Errorf("kustomization.yaml does not list %s", f)
		}
	}
	if len(byKind["StatefulSet"]) != 1 {
		t.Fatalf("%d StatefulSets", len(byKind["StatefulSet"]))
	}
	sts := byKind["StatefulSet"][0]
	setName := str(t, sts, "metadata", "name")
	if r := dig(t, sts, "spec", "replicas"); r != 3 {
		t.Errorf("replicas %v", r)
	}
	podLabels := dig(t, sts, "spec", "template", "metadata", "labels").(map[string]any)
	for k, v := range dig(t, sts, "spec", "selector", "matchLabels").(map[string]any) {
		if podLabels[k] != v {
			t.Errorf("selector %s=%v does not match the pod labels", k, v)
		}
	}
	matches := func(sel any) bool {
		m, _ := sel.(map[string]any)
		for k, v := range m {
			if podLabels[k] != v {
				return false
			}
		}
		return len(m) > 0
	}

	// Services: the headless one is the StatefulSet's, a client one too.
	peers := str(t, sts, "spec", "serviceName")
	var headless, client map[string]any
	for _, s := range byKind["Service"] {
		if !matches(dig(t, s, "spec", "selector")) {
			t.Errorf("service %s does not select the pods", str(t, s, "metadata", "name"))
		}
		if str(t, s, "metadata", "name") == peers {
			headless = s
		} else if str(t, s, "spec", "clusterIP") != "None" {
			client = s
		}
	}
	if headless == nil || client == nil {
		t.Fatalf("want the headless service %q and a client service", peers)
	}
	if str(t, headless, "spec", "clusterIP") != "None" || dig(t, headless, "spec", "publishNotReadyAddresses") != true {
		t.Error("the peers service must be headless and publish not-ready pods (a node is ready only once a leader is known)")
	}
	servicePorts := func(s map[string]any) map[string]bool {
		out := map[string]bool{}
		for _, p := range dig(t, s, "spec", "ports").([]any) {
			out[fmt.Sprint(p.(map[string]any)["port"])] = true
		}
		return out
	}
	if p := servicePorts(headless); !p["6379"] || !p["16379"] {
		t.Errorf("peers service ports %v: want RESP 6379 and Raft 16379", p)
	}
	if p := servicePorts(client); !p["6379"] {
		t.Errorf("client service ports %v", p)
	}

	// PodDisruptionBudget.
	if len(byKind["PodDisruptionBudget"]) != 1 {
		t.Fatal("no PodDisruptionBudget")
	}
	pdb := byKind["PodDisruptionBudget"][0]
	if dig(t, pdb, "spec", "maxUnavailable") != 1 || !matches(dig(t, pdb, "spec", "selector", "matchLabels")) {
		t.Errorf("PDB %v: want maxUnavailable 1 over the pods", dig(t, pdb, "spec"))
	}

	// The config the pods share.
	var conf string
	for _, cm := range byKind["ConfigMap"] {
		if c, ok := dig(t, cm, "data").(map[string]any)["bfserver.conf"].(string); ok {
			conf = c
		}
	}
	setting := func(name string) string {
		for _, line := range strings.Split(conf, "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == name {
				return f[1]
			}
		}
		return ""
	}
	if setting("join") != "" || setting("addr") != "" || setting("node-id") != "" {
		t.Error("the shared config must not set join, addr or node-id: they are per pod")
	}
	httpPort := setting("http-addr")[strings.LastIndex(setting("http-addr"), ":")+1:]
	dataDir := setting("data-dir")

	spec := dig(t, sts, "spec", "template", "spec")
	ctr := named(t, dig(t, spec, "containers"), "bfserver")
	env := dig(t, ctr, "env")
	if p := str(t, named(t, env, "POD_NAME"), "valueFrom", "fieldRef", "fieldPath"); p != "metadata.name" {
		t.Errorf("POD_NAME from %q", p)
	}
	if v := str(t, named(t, env, "BFSERVER_NODE_ID"), "value"); v != "$(POD_NAME)" {
		t.Errorf("node id %q: want the pod name", v)
	}
	wantAddr := "$(POD_NAME)." + peers + ".$(POD_NAMESPACE).svc.cluster.local:6379"
	if v := str(t, named(t, env, "BFSERVER_ADDR"), "value"); v != wantAddr {
		t.Errorf("address %q: want %q (the advertised address; 0.0.0.0 cannot be)", v, wantAddr)
	}
	if str(t, named(t, env, "BFSERVER_REQUIREPASS"), "valueFrom", "secretKeyRef", "key") == "" {
		t.Error("no password from a Secret: protected mode refuses other pods without one")
	}
	// The pods listen off loopback and join: without a cluster secret or
	// cluster TLS they refuse to start.
	secretRef := ""
	for _, e := range env.([]any) {
		if m, ok := e.(map[string]any); ok && m["name"] == "BFSERVER_CLUSTER_SECRET" {
			secretRef = str(t, m, "valueFrom", "secretKeyRef", "key")
		}
	}
	if secretRef == "" && setting("tls-cluster") != "true" {
		t.Error("no cluster secret from a Secret (BFSERVER_CLUSTER_SECRET) and no tls-cluster: the pods do not start")
	}
	if secretRef != "" {
		steps, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(steps), "--from-literal="+secretRef+"=") {
			t.Errorf("kustomization.yaml's steps do not create the Secret's key %q", secretRef)
		}
	}
	ports := map[string]string{}
	for _, p := range dig(t, ctr, "ports").([]any) {
		ports[p.(map[string]any)["name"].(string)] = fmt.Sprint(p.(map[string]any)["containerPort"])
	}
	if ports["resp"] != "6379" || ports["raft"] != "16379" || ports["http"] != httpPort {
		t.Errorf("container ports %v (config's HTTP port %s)", ports, httpPort)
	}
	for probe, path := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz", "startupProbe": "/healthz"} {
		get := dig(t, ctr, probe, "httpGet")
		if str(t, get, "path") != path || ports[str(t, get, "port")] != httpPort {
			t.Errorf("%s: %v, want %s on the HTTP port", probe, get, path)
		}
	}
	claim := str(t, sts, "spec", "volumeClaimTemplates", 0, "metadata", "name")
	mount := ""
	for _, m := range dig(t, ctr, "volumeMounts").([]any) {
		if m.(map[string]any)["name"] == claim {
			mount = m.(map[string]any)["mountPath"].(string)
		}
	}
	if mount == "" || !strings.HasPrefix(dataDir, mount+"/") {
		t.Errorf("data-dir %q is not on the claim %q (mounted at %q)", dataDir, claim, mount)
	}
	if dig(t, spec, "securityContext", "runAsNonRoot") != true {
		t.Error("pods may run as root")
	}
	args := dig(t, ctr, "args").([]any)
	if len(args) != 2 || args[0] != "--config" {
		t.Fatalf("container args %v", args)
	}

	// The init container's script, run here with sh for each case.
	initC := named(t, dig(t, spec, "initContainers"), "config")
	script := str(t, initC, "args", 0)
	initEnv := dig(t, initC, "env")
	if str(t, named(t, initEnv, "CONF_OUT"), "value") != args[1] || str(t, named(t, initEnv, "DATA_DIR"), "value") != dataDir ||
		str(t, named(t, initEnv, "PEERS_SERVICE"), "value") != peers {
		t.Fatalf("the init container's CONF_OUT, DATA_DIR, PEERS_SERVICE differ from the server's")
	}
	sh := needTool(t, "sh", "dash")
	runInit := func(pod string, hasData bool, live string) string {
		t.Helper()
		tmp := t.TempDir()
		os.WriteFile(filepath.Join(tmp, "in.conf"), []byte(conf), 0o644)
		data := filepath.Join(tmp, "data")
		os.MkdirAll(data, 0o755)
		if hasData {
			os.WriteFile(filepath.Join(data, "raft.db"), nil, 0o644)
		}
		// wget answers only for the live peer's /healthz.
		bin := filepath.Join(tmp, "bin")
		os.MkdirAll(bin, 0o755)
		os.WriteFile(filepath.Join(bin, "wget"), []byte("#!/bin/sh\nfor a; do case \"$a\" in http://*) url=$a;; esac; done\n"+
			"[ -n \"$LIVE\" ] && case \"$url\" in \"http://$LIVE.\"*\":"+httpPort+"/healthz\") exit 0;; esac\nexit 1\n"), 0o755)
		cmd := exec.Command(sh, "-c", script)
		cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "POD_NAME=" + pod, "POD_NAMESPACE=ns1", "PEERS_SERVICE=" + peers,
			"CONF_IN=" + filepath.Join(tmp, "in.conf"), "CONF_OUT=" + filepath.Join(tmp, "out.conf"), "DATA_DIR=" + data, "LIVE=" + live}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("init script for %s: %v\n%s", pod, err, out)
		}
		out, _ := os.ReadFile(filepath.Join(tmp, "out.conf"))
		if !strings.HasPrefix(string(out), conf) {
			t.Fatalf("%s: the shared config was not copied:\n%s", pod, out)
		}
		return strings.TrimSpace(strings.TrimPrefix(string(out), conf))
	}
	domain := "." + peers + ".ns1.svc.cluster.local:6379"
	for _, c := range []struct {
		pod     string
		hasData bool
		live    string
		want    string
	}{
		{setName + "-1", false, "", "join " + setName + "-0" + domain},
		{setName + "-2", true, "", "join " + setName + "-0" + domain},
		{setName + "-0", false, "", ""}, // bootstraps
		{setName + "-0", true, "", "join " + setName + "-1" + domain},
		{setName + "-0", false, setName + "-2", "join " + setName + "-2" + domain},
	} {
		if got := runInit(c.pod, c.hasData, c.live); got != c.want {
			t.Errorf("%s (data %v, live peer %q): appended %q, want %q", c.pod, c.hasData, c.live, got, c.want)
		}
	}
	if want := "join bfserver-0.bfserver-peers.ns1.svc.cluster.local:6379"; runInit("bfserver-1", false, "") != want {
		t.Errorf("pod 1 does not join through %s", want)
	}
}

// TestDeploySystemd: `systemd-analyze verify` accepts the unit (with
// ExecStart pointed at the built binary, which verify requires to exist)
// and prints nothing about it; the unit has the settings docs/DEPLOY.md
// promises; the example config says where a cluster's secret goes; and
// the config it starts with runs a real node.
func TestDeploySystemd(t *testing.T) {
	unit, err := os.ReadFile(filepath.Join(repo, "deploy", "systemd", "bfserver.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"User=bfserver", "StateDirectory=bfserver", "LimitNOFILE=", "Restart=on-failure",
		"EnvironmentFile=-/etc/bfserver/bfserver.env", "ExecStart=/usr/local/bin/bfserver --config /etc/bfserver/bfserver.conf",
		"NoNewPrivileges=yes", "ProtectSystem=strict", "CapabilityBoundingSet=\n"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("unit lacks %q", want)
		}
	}
	conf := filepath.Join(repo, "deploy", "bfserver.conf")
	c, _ := os.ReadFile(conf)
	if !strings.Contains(string(c), "\ndata-dir /var/lib/bfserver\n") {
		t.Error("the example config's data-dir is not the unit's StateDirectory")
	}
	if !strings.Contains(string(c), "BFSERVER_CLUSTER_SECRET") || !strings.Contains(string(c), "cluster-secret-file") {
		t.Error("the example config does not say where a cluster's secret goes")
	}
	// The example config as it is, with the test's addresses and data dir.
	httpAddr := freeAddr(t)
	start(t, "--config", conf, "--http-addr", httpAddr)
	waitFor(t, 20e9, "/readyz", func() bool { code, _ := scrape(t, httpAddr, "/readyz"); return code == 200 })

	analyze := needTool(t, "systemd-analyze", "systemd")
	dir := t.TempDir()
	path := filepath.Join(dir, "bfserver.service")
	os.WriteFile(path, bytes.ReplaceAll(unit, []byte("/usr/local/bin/bfserver"), []byte(binary)), 0o644)
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	// verify exits 0 on directives it ignores, and says so.
	var ours []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "bfserver") {
			ours = append(ours, line)
		}
	}
	if err != nil || len(ours) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// gitHead is the checkout's commit, or "" outside one.
func gitHead(t *testing.T) string {
	out, err := exec.Command("git", "-C", repo, "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// checkStatic fails unless path is a static, stripped ELF executable:
// no PT_INTERP, no dynamic section, no symbol table.
func checkStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s has %v: not static", path, p.Type)
		}
	}
	if f.Section(".symtab") != nil {
		t.Errorf("%s has a symbol table: not stripped", path)
	}
	if file, err := exec.LookPath("file"); err == nil {
		out, _ := exec.Command(file, path).Output()
		if !strings.Contains(string(out), "statically linked") {
			t.Errorf("file: %s", out)
		}
	}
}

// TestDeployMakeBuild: `make build` makes a static, stripped binary that
// prints, with --version, the checkout's commit, a build date and the Go
// version.
func TestDeployMakeBuild(t *testing.T) {
	mk := needTool(t, "make", "make")
	bin := filepath.Join(t.TempDir(), "bfserver")
	cmd := exec.Command(mk, "-C", repo, "build", "BIN="+bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	checkStatic(t, bin)
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	v := string(out)
	if head := gitHead(t); head != "" && !strings.Contains(v, "\ncommit "+head) {
		t.Errorf("--version does not print commit %s:\n%s", head, v)
	}
	if !strings.Contains(v, runtime.Version()) || strings.Contains(v, "built unknown") {
		t.Errorf("--version:\n%s", v)
	}
}

// dockerfile reads the Dockerfile's instructions, continuation lines
// joined, as [instruction, arguments] per stage.
func dockerfile(t *testing.T) [][][2]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var stages [][][2]string
	joined := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(string(data), " ")
	for _, line := range strings.Split(joined, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		ins, rest, _ := strings.Cut(line, " ")
		ins = strings.ToUpper(ins)
		if ins == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) > 0 {
			stages[len(stages)-1] = append(stages[len(stages)-1], [2]string{ins, strings.TrimSpace(rest)})
		}
	}
	return stages
}

// TestDeployDockerfile: the image is multi-stage, ends on distroless
// static (or scratch) as a non-root user with a VOLUME for the data dir,
// exposes the RESP, Raft and HTTP ports, and its HEALTHCHECK is the
// binary's healthcheck subcommand. No Docker engine runs here, so the
// builder's go build line runs as it is on this machine, and the
// HEALTHCHECK command runs against a real node with the image's
// environment: exit 1 before the node is up, 0 once it is ready.
func TestDeployDockerfile(t *testing.T) {
	stages := dockerfile(t)
	if len(stages) < 2 {
		t.Fatalf("%d stages: want a builder and a runtime", len(stages))
	}
	final := stages[len(stages)-1]
	get := func(ins string) []string {
		var out []string
		for _, i := range final {
			if i[0] == ins {
				out = append(out, i[1])
			}
		}
		return out
	}
	if from := final[0][1]; !strings.Contains(from, "distroless/static") && from != "scratch" {
		t.Errorf("runtime image %s", from)
	}
	if u := get("USER"); len(u) != 1 || u[0] == "0" || strings.HasPrefix(u[0], "root") || strings.HasPrefix(u[0], "0:") {
		t.Errorf("USER %v: want a non-root user", u)
	}
	env := map[string]string{}
	for _, e := range get("ENV") {
		for _, kv := range strings.Fields(e) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	if v := strings.Join(get("VOLUME"), " "); !strings.Contains(v, `"`+env["BFSERVER_DATA_DIR"]+`"`) || env["BFSERVER_DATA_DIR"] == "" {
		t.Errorf("VOLUME %s, data dir %q", v, env["BFSERVER_DATA_DIR"])
	}
	expose := strings.Fields(strings.Join(get("EXPOSE"), " "))
	httpPort := env["BFSERVER_HTTP_ADDR"][strings.LastIndex(env["BFSERVER_HTTP_ADDR"], ":")+1:]
	for _, p := range []string{"6379", "16379", httpPort} {
		if !slices.Contains(expose, p) {
			t.Errorf("EXPOSE %v lacks %s", expose, p)
		}
	}
	var entry []string
	if e := get("ENTRYPOINT"); len(e) != 1 || json.Unmarshal([]byte(e[0]), &entry) != nil {
		t.Fatalf("ENTRYPOINT %v", e)
	}
	hc := get("HEALTHCHECK")
	var hcCmd []string
	if len(hc) != 1 || json.Unmarshal([]byte(hc[0][strings.Index(hc[0], "CMD ")+4:]), &hcCmd) != nil ||
		len(hcCmd) < 2 || hcCmd[0] != entry[0] || hcCmd[1] != "healthcheck" {
		t.Fatalf("HEALTHCHECK %v: want the entrypoint's healthcheck subcommand", hc)
	}
	ignore, _ := os.ReadFile(filepath.Join(repo, ".dockerignore"))
	for _, line := range strings.Fields(string(ignore)) {
		if slices.Contains([]string{"go.mod", "go.sum", "cmd", "*", "."}, line) {
			t.Errorf(".dockerignore drops %s, which the build needs", line)
		}
	}

	// The builder's go build, with the build arguments filled in.
	var build string
	for _, i := range stages[0] {
		if i[0] == "RUN" && strings.Contains(i[1], "go build") {
			build = i[1]
		}
	}
	out := t.TempDir()
	build = strings.NewReplacer("${VERSION}", "v9.9.9", "${COMMIT}", "0123456789abcdef", "${BUILD_DATE}", "2030-01-01T00:00:00Z",
		"/out/", out+"/").Replace(build)
	cmd := exec.Command(needTool(t, "sh", "dash"), "-c", build)
	cmd.Dir = repo
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, o)
	}
	bin := filepath.Join(out, "bfserver")
	checkStatic(t, bin)
	v, _ := exec.Command(bin, "--version").Output()
	if !strings.Contains(string(v), "commit 0123456789abcdef") || !strings.Contains(string(v), "built 2030-01-01T00:00:00Z") {
		t.Errorf("the image's --version:\n%s", v)
	}

	// The HEALTHCHECK as the container runs it: the image's environment,
	// with this test's port for the HTTP address.
	httpAddr := freeAddr(t)
	probe := func() int {
		c := exec.Command(bin, hcCmd[1:]...)
		c.Env = append(os.Environ(), "BFSERVER_HTTP_ADDR=0.0.0.0"+httpAddr[strings.LastIndex(httpAddr, ":"):])
		c.Run()
		return c.ProcessState.ExitCode()
	}
	if code := probe(); code != 1 {
		t.Fatalf("healthcheck with no server: exit %d", code)
	}
	start(t, "--http-addr", httpAddr)
	waitFor(t, 20e9, "the HEALTHCHECK to pass", func() bool { return probe() == 0 })
}

// TestDeployPrometheusRules: promtool accepts the alert rules, and their
// unit tests (deploy/prometheus/bfserver-rules.test.yml: no leader, not
// ready, apply lag, over capacity, rebuild, several leaders, a node that
// is not a member) pass.
func TestDeployPrometheusRules(t *testing.T) {
	promtool := needTool(t, "promtool", "prometheus")
	dir := filepath.Join(repo, "deploy", "prometheus")
	for _, args := range [][]string{{"check", "rules", "bfserver-rules.yml"}, {"test", "rules", "bfserver-rules.test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

var metricName = regexp.MustCompile(`\bbfserver_[a-z0-9_]+\b`)

// jsonStrings collects the string values of the given keys in a JSON document.
func jsonStrings(v any, keys []string, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && slices.Contains(keys, k) {
				*out = append(*out, s)
			} else {
				jsonStrings(e, keys, out)
			}
		}
	case []any:
		for _, e := range v {
			jsonStrings(e, keys, out)
		}
	}
}

// TestDeployDashboard: the Grafana dashboard parses, its panel ids are
// unique, every query is valid PromQL (promtool, with Grafana's variables
// filled in), and every metric name it or the alert rules use is one that
// a real node exports, scraped with Bloom and Cuckoo filters in it.
func TestDeployDashboard(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repo, "deploy", "grafana", "bfserver.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	ids := map[float64]bool{}
	for _, p := range dig(t, dash, "panels").([]any) {
		id, _ := p.(map[string]any)["id"].(float64)
		if ids[id] {
			t.Errorf("panel id %v twice", id)
		}
		ids[id] = true
	}
	// Panel queries, and the variables' label_values queries.
	var qs, vars []string
	jsonStrings(dash, []string{"expr"}, &qs)
	jsonStrings(dig(t, dash, "templating"), []string{"query", "definition"}, &vars)
	if len(qs) < 20 {
		t.Fatalf("only %d queries", len(qs))
	}

	// Every query as a recording rule, for promtool to parse.
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	fill := strings.NewReplacer("$__rate_interval", "5m", "$job", ".*", "$instance", ".*")
	for i, q := range qs {
		b, _ := json.Marshal(fill.Replace(q))
		fmt.Fprintf(&rules, "      - record: dashboard:query%d\n        expr: %s\n", i, b)
	}
	promtool := needTool(t, "promtool", "prometheus")
	file := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	os.WriteFile(file, []byte(rules.String()), 0o644)
	if out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Fatalf("dashboard queries: %v\n%s", err, out)
	}

	httpAddr := freeAddr(t)
	n := start(t, "--http-addr", httpAddr)
	waitFor(t, 20e9, "/readyz", func() bool { code, _ := scrape(t, httpAddr, "/readyz"); return code == 200 })
	c := n.client(2)
	for _, cmd := range [][]any{{"BF.ADD", "b", "x"}, {"CF.ADD", "c", "x"}, {"BF.EXISTS", "b", "y"}} {
		if err := c.Do(ctx(t), cmd...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	_, body := scrape(t, httpAddr, "/metrics")
	exported := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			exported[metricName.FindString(line)] = true
		}
	}
	used := map[string]string{}
	for _, q := range append(qs, vars...) {
		for _, m := range metricName.FindAllString(q, -1) {
			used[m] = "the dashboard"
		}
	}
	rulesFile, _ := os.ReadFile(filepath.Join(repo, "deploy", "prometheus", "bfserver-rules.yml"))
	for _, m := range metricName.FindAllString(string(rulesFile), -1) {
		used[m] = "the alert rules"
	}
	for m, where := range used {
		if !exported[m] {
			t.Errorf("%s uses %s, which bfserver does not export", where, m)
		}
	}
}
