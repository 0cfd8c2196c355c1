package server

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bfserver/bfserver/command"
	"github.com/bfserver/bfserver/internal/ascii"
	"github.com/bfserver/bfserver/keyspace"
)

// INFO in Redis 8's sections, field names and formats, so that Redis
// tools (redis-cli --stat, prometheus-redis-exporter, dashboards) read it.
// Values are this server's own: a field whose feature bfserver does not
// have (Lua, pub/sub, forks, AOF rewrites, Redis replication's backlog)
// reads what Redis reads without it, 0 or "ok"; memory is the Go heap's
// (used_memory: bytes in live and not yet collected heap objects) and the
// process's resident set; INFO replication is the replication backend's
// (Cluster.ReplicationInfo), Raft's own fields included.

// Sections in Redis's order; the default ones are INFO's with no argument.
// bfserver's own (own) are given only when named: INFO all and everything
// list Redis's sections alone.
var infoSections = []struct {
	name     string
	dflt     bool
	generate func(s *Server, b *infoBuilder)
	own      bool
}{
	{"Server", true, (*Server).infoServer, false},
	{"Clients", true, (*Server).infoClients, false},
	{"Memory", true, (*Server).infoMemory, false},
	{"Persistence", true, (*Server).infoPersistence, false},
	{"Stats", true, (*Server).infoStats, false},
	{"Replication", true, (*Server).infoReplication, false},
	{"CPU", true, (*Server).infoCPU, false},
	{"Modules", true, (*Server).infoModules, false},
	{"Commandstats", false, (*Server).infoCommandstats, false},
	{"Errorstats", true, (*Server).infoErrorstats, false},
	{"Latencystats", false, (*Server).infoLatencystats, false},
	{"Cluster", true, (*Server).infoCluster, false},
	{"Keyspace", true, (*Server).infoKeyspace, false},
	{"Writestages", false, (*Server).infoWritestages, true},
}

type infoBuilder struct{ strings.Builder }

func (b *infoBuilder) kv(k string, v any) {
	b.WriteString(k)
	b.WriteByte(':')
	switch x := v.(type) {
	case string:
		b.WriteString(x)
	case int:
		b.WriteString(strconv.Itoa(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case uint64:
		b.WriteString(strconv.FormatUint(x, 10))
	default:
		fmt.Fprint(b, x)
	}
	b.WriteString("\r\n")
}

func cmdInfo(s *session, a [][]byte) {
	s.w.Verbatim(s.srv.infoText(a[1:]))
}

// infoText renders the sections asked for: none or "default" for the
// default ones, "all" for every one, "everything" likewise (there are no
// module sections), or any list of names, in any case.
func (s *Server) infoText(args [][]byte) string {
	want := map[string]bool{}
	all, dflt := false, len(args) == 0
	for _, a := range args {
		switch n := ascii.ToLower(a); n {
		case "all", "everything":
			all = true
		case "default":
			dflt = true
		default:
			want[n] = true
		}
	}
	var b infoBuilder
	for _, sec := range infoSections {
		named := want[ascii.ToLower(sec.name)]
		if !named && (sec.own || !all && !(dflt && sec.dflt)) {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + sec.name + "\r\n")
		sec.generate(s, &b)
	}
	return b.String()
}

// buildID is redis_build_id: the source revision the binary was built
// from, or without one a digest of its build information (Go version,
// dependencies, settings).
var buildID = func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "0"
	}
	for _, st := range bi.Settings {
		if st.Key == "vcs.revision" && len(st.Value) >= 16 {
			return st.Value[:16]
		}
	}
	sum := sha1.Sum([]byte(bi.String()))
	return hex.EncodeToString(sum[:8])
}()

var osName = func() string {
	machine := map[string]string{"amd64": "x86_64", "arm64": "aarch64", "386": "i686"}[runtime.GOARCH]
	if machine == "" {
		machine = runtime.GOARCH
	}
	typ, err1 := os.ReadFile("/proc/sys/kernel/ostype")
	rel, err2 := os.ReadFile("/proc/sys/kernel/osrelease")
	if err1 != nil || err2 != nil {
		return runtime.GOOS + " " + machine
	}
	return strings.TrimSpace(string(typ)) + " " + strings.TrimSpace(string(rel)) + " " + machine
}()

func (s *Server) infoServer(b *infoBuilder) {
	now := time.Now()
	up := now.Sub(s.start)
	b.kv("redis_version", RedisVersion)
	b.kv("redis_git_sha1", "00000000")
	b.kv("redis_git_dirty", 0)
	b.kv("redis_build_id", buildID)
	b.kv("redis_mode", "standalone")
	b.kv("os", osName)
	b.kv("arch_bits", strconv.IntSize)
	b.kv("monotonic_clock", "POSIX clock_gettime")
	if runtime.GOOS == "linux" {
		b.kv("multiplexing_api", "epoll")
	} else {
		b.kv("multiplexing_api", "kqueue")
	}
	b.kv("atomicvar_api", "sync-atomic")
	b.kv("gcc_version", "0.0.0")
	b.kv("process_id", pid())
	supervised := "no"
	if os.Getenv("INVOCATION_ID") != "" {
		supervised = "systemd"
	}
	b.kv("process_supervised", supervised)
	b.kv("run_id", s.adm.runID)
	b.kv("tcp_port", portOf(s.boundAddr()))
	b.kv("server_time_usec", now.UnixMicro())
	b.kv("uptime_in_seconds", int64(up/time.Second))
	b.kv("uptime_in_days", int64(up/(24*time.Hour)))
	hz := s.hz.Load()
	b.kv("hz", hz)
	b.kv("configured_hz", hz)
	b.kv("lru_clock", now.Unix()&(1<<24-1))
	exe, _ := os.Executable()
	b.kv("executable", exe)
	cfg := ""
	if s.opts.ConfigFile != "" {
		cfg, _ = filepath.Abs(s.opts.ConfigFile)
	}
	b.kv("config_file", cfg)
	b.kv("io_threads_active", 0)
	name := "tcp"
	if s.opts.TLS != nil {
		name = "tls"
	}
	b.kv("listener0", "name="+name+",bind="+hostOf(s.boundAddr())+",port="+portOf(s.boundAddr()))
	b.kv("server_name", ServerName)
	b.kv("go_version", runtime.Version())
}

func (s *Server) infoClients(b *infoBuilder) {
	list := s.clientList()
	var maxIn, maxOut int64
	blocked := 0
	for _, c := range list {
		maxIn = max(maxIn, c.adm.pub.qbuf.Load())
		maxOut = max(maxOut, c.adm.pub.omem.Load())
		if c.adm.pub.word.Load()>>16&cflBlocked != 0 {
			blocked++
		}
	}
	b.kv("connected_clients", len(list))
	b.kv("cluster_connections", 0)
	b.kv("maxclients", s.adm.maxClients.Load())
	b.kv("client_recent_max_input_buffer", maxIn)
	b.kv("client_recent_max_output_buffer", maxOut)
	b.kv("blocked_clients", blocked)
	b.kv("tracking_clients", 0)
	b.kv("pubsub_clients", 0)
	b.kv("watching_clients", 0)
	b.kv("clients_in_timeout_table", 0)
	b.kv("total_watched_keys", 0)
	b.kv("total_blocking_keys", 0)
	b.kv("total_blocking_keys_on_nokey", 0)
}

// memStats is the Go runtime's view of its memory, read without stopping
// the world.
type memStats struct {
	heap, unused, free, released, total uint64
}

var memSamples = []string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes", "/memory/classes/heap/released:bytes", "/memory/classes/total:bytes"}

var memMu sync.Mutex
var memBuf = func() []metrics.Sample {
	out := make([]metrics.Sample, len(memSamples))
	for i, n := range memSamples {
		out[i].Name = n
	}
	return out
}()

func readMem() memStats {
	memMu.Lock()
	defer memMu.Unlock()
	metrics.Read(memBuf)
	v := func(i int) uint64 {
		if memBuf[i].Value.Kind() == metrics.KindUint64 {
			return memBuf[i].Value.Uint64()
		}
		return 0
	}
	return memStats{heap: v(0), unused: v(1), free: v(2), released: v(3), total: v(4)}
}

// rss is the resident set size (Linux /proc/self/statm), or 0.
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

var totalSystemMemory = func() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseUint(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}()

// humanBytes is Redis's bytesToHuman.
func humanBytes(n uint64) string {
	d := float64(n)
	switch {
	case n < 1<<10:
		return strconv.FormatUint(n, 10) + "B"
	case n < 1<<20:
		return fmt.Sprintf("%.2fK", d/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.2fM", d/(1<<20))
	case n < 1<<40:
		return fmt.Sprintf("%.2fG", d/(1<<30))
	case n < 1<<50:
		return fmt.Sprintf("%.2fT", d/(1<<40))
	case n < 1<<60:
		return fmt.Sprintf("%.2fP", d/(1<<50))
	}
	return strconv.FormatUint(n, 10) + "B"
}

func ratio(a, b uint64) string {
	if b == 0 {
		return "0.00"
	}
	return fmt.Sprintf("%.2f", float64(a)/float64(b))
}

// notePeak raises used_memory_peak to used and returns the peak.
func (s *Server) notePeak(used uint64) uint64 {
	for {
		p := s.adm.peakMem.Load()
		if used <= p {
			return p
		}
		if s.adm.peakMem.CompareAndSwap(p, used) {
			return used
		}
	}
}

func (s *Server) infoMemory(b *infoBuilder) {
	m := readMem()
	used := m.heap
	peak := s.notePeak(used)
	res := rss()
	if res == 0 {
		res = m.total - m.released
	}
	dataset := min(s.backend.State().Bytes(), used)
	startup := min(s.adm.startHeap, used)
	active := m.heap + m.unused
	resident := active + m.free
	var normal, replicas int64
	for _, c := range s.clientList() {
		mem := sessionSize + c.adm.pub.rbs.Load() + c.adm.pub.wbuf.Load() + c.adm.pub.omem.Load()
		if c.clientType() == "replica" {
			replicas += mem
		} else {
			normal += mem
		}
	}
	perc := func(a, b uint64) string {
		if b == 0 {
			return "0.00%"
		}
		return fmt.Sprintf("%.2f%%", float64(a)*100/float64(b))
	}
	maxmem := s.maxMemory.Load()
	b.kv("used_memory", used)
	b.kv("used_memory_human", humanBytes(used))
	b.kv("used_memory_rss", res)
	b.kv("used_memory_rss_human", humanBytes(res))
	b.kv("used_memory_peak", peak)
	b.kv("used_memory_peak_human", humanBytes(peak))
	b.kv("used_memory_peak_perc", perc(used, peak))
	b.kv("used_memory_overhead", used-dataset)
	b.kv("used_memory_startup", startup)
	b.kv("used_memory_dataset", dataset)
	b.kv("used_memory_dataset_perc", perc(dataset, used-startup))
	b.kv("allocator_allocated", m.heap)
	b.kv("allocator_active", active)
	b.kv("allocator_resident", resident)
	b.kv("allocator_muzzy", 0)
	b.kv("total_system_memory", totalSystemMemory)
	b.kv("total_system_memory_human", humanBytes(totalSystemMemory))
	// No scripting: Lua, scripts and functions hold nothing.
	b.kv("used_memory_lua", 0)
	b.kv("used_memory_vm_eval", 0)
	b.kv("used_memory_lua_human", "0B")
	b.kv("used_memory_scripts_eval", 0)
	b.kv("number_of_cached_scripts", 0)
	b.kv("number_of_functions", 0)
	b.kv("number_of_libraries", 0)
	b.kv("used_memory_vm_functions", 0)
	b.kv("used_memory_vm_total", 0)
	b.kv("used_memory_vm_total_human", "0B")
	b.kv("used_memory_functions", 0)
	b.kv("used_memory_scripts", 0)
	b.kv("used_memory_scripts_human", "0B")
	b.kv("maxmemory", maxmem)
	b.kv("maxmemory_human", humanBytes(maxmem))
	b.kv("maxmemory_policy", "noeviction")
	b.kv("allocator_frag_ratio", ratio(active, m.heap))
	b.kv("allocator_frag_bytes", int64(active)-int64(m.heap))
	b.kv("allocator_rss_ratio", ratio(resident, active))
	b.kv("allocator_rss_bytes", int64(resident)-int64(active))
	b.kv("rss_overhead_ratio", ratio(res, resident))
	b.kv("rss_overhead_bytes", int64(res)-int64(resident))
	b.kv("mem_fragmentation_ratio", ratio(res, used))
	b.kv("mem_fragmentation_bytes", int64(res)-int64(used))
	b.kv("mem_not_counted_for_evict", 0)
	b.kv("mem_replication_backlog", 0)
	b.kv("mem_total_replication_buffers", 0)
	b.kv("mem_clients_slaves", replicas)
	b.kv("mem_clients_normal", normal)
	b.kv("mem_cluster_links", 0)
	b.kv("mem_aof_buffer", 0)
	b.kv("mem_allocator", runtime.Version())
	b.kv("mem_overhead_db_hashtable_rehashing", 0)
	b.kv("active_defrag_running", 0)
	b.kv("lazyfree_pending_objects", 0)
	b.kv("lazyfreed_objects", 0)
	// bfserver's own breakdown follows Redis's fields: the filters' bytes,
	// the clients' buffers, and the image's and the log's memory.
	var image, log uint64
	if c, ok := s.cluster.(memoryReporter); ok {
		image, log = c.MemoryInfo()
	}
	b.kv("mem_filters", s.backend.State().Bytes())
	b.kv("mem_buffers", normal+replicas)
	b.kv("mem_image", image)
	b.kv("mem_raft", log)
}

// memoryReporter is implemented by a Cluster that can tell what its image
// and its log hold in memory.
type memoryReporter interface {
	MemoryInfo() (image, log uint64)
}

// imageReporter is implemented by a Cluster that counts its image's
// writes; INFO persistence ends with its fields.
type imageReporter interface {
	ImageInfo() [][2]string
}

// writeStager is implemented by a Cluster that times the durable path of
// writes by stage: INFO writestages, bfserver's own section (given only
// when named, so that INFO reads as Redis's), reset by CONFIG RESETSTAT.
type writeStager interface {
	WriteStages() [][2]string
	ResetWriteStages()
}

func (s *Server) infoWritestages(b *infoBuilder) {
	if c, ok := s.cluster.(writeStager); ok {
		for _, f := range c.WriteStages() {
			b.kv(f[0], f[1])
		}
	}
}

// changesCounter is implemented by a Cluster that can tell how many log
// entries it applied since its latest snapshot.
type changesCounter interface {
	ChangesSinceSnapshot() uint64
}

// loading reports whether the keyspace is being replaced (a snapshot
// restore, DEBUG RELOAD): reads answer LOADING meanwhile.
func (s *Server) loading() bool {
	r := s.backend.State().Read(&command.Cmd{Op: command.DBSize})
	return r.Err == keyspace.ErrLoading
}

func (s *Server) infoPersistence(b *infoBuilder) {
	st := &s.adm.saves
	st.mu.Lock()
	running, bg, started, failed, bgDur, saves := st.running, st.bg, st.started, st.failed, st.bgDur, st.saves
	st.mu.Unlock()
	changes := uint64(max(s.adm.changes.Load(), 0))
	if c, ok := s.cluster.(changesCounter); ok {
		changes = c.ChangesSinceSnapshot()
	}
	b.kv("loading", b2i(s.loading()))
	b.kv("async_loading", 0)
	b.kv("current_cow_peak", 0)
	b.kv("current_cow_size", 0)
	b.kv("current_cow_size_age", 0)
	b.kv("current_fork_perc", "0.00")
	b.kv("current_save_keys_processed", 0)
	b.kv("current_save_keys_total", 0)
	b.kv("rdb_changes_since_last_save", changes)
	b.kv("rdb_bgsave_in_progress", b2i(running && bg))
	b.kv("rdb_last_save_time", s.lastSave().Unix())
	status := "ok"
	if failed {
		status = "err"
	}
	b.kv("rdb_last_bgsave_status", status)
	last := int64(-1)
	if bgDur != 0 {
		last = int64(bgDur / time.Second)
	}
	b.kv("rdb_last_bgsave_time_sec", last)
	cur := int64(-1)
	if running && bg {
		cur = int64(time.Since(started) / time.Second)
	}
	b.kv("rdb_current_bgsave_time_sec", cur)
	b.kv("rdb_saves", saves)
	b.kv("rdb_last_cow_size", 0)
	b.kv("rdb_last_load_keys_expired", 0)
	b.kv("rdb_last_load_keys_loaded", s.adm.loadedKeys)
	b.kv("aof_enabled", 0)
	b.kv("aof_rewrite_in_progress", 0)
	b.kv("aof_rewrite_scheduled", 0)
	b.kv("aof_last_rewrite_time_sec", -1)
	b.kv("aof_current_rewrite_time_sec", -1)
	b.kv("aof_last_bgrewrite_status", "ok")
	b.kv("aof_rewrites", 0)
	b.kv("aof_rewrites_consecutive_failures", 0)
	b.kv("aof_last_write_status", "ok")
	b.kv("aof_last_cow_size", 0)
	b.kv("module_fork_in_progress", 0)
	b.kv("module_fork_last_cow_size", 0)
	if c, ok := s.cluster.(imageReporter); ok {
		for _, f := range c.ImageInfo() {
			b.kv(f[0], f[1])
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *Server) infoStats(b *infoBuilder) {
	a := &s.adm
	ops, in, out := a.inst.rates()
	b.kv("total_connections_received", s.stats.connections.Load()-a.connBase.Load())
	b.kv("total_commands_processed", s.processed())
	b.kv("instantaneous_ops_per_sec", int64(ops+0.5))
	io := s.ioTotals()
	b.kv("total_net_input_bytes", io[ioNetIn])
	b.kv("total_net_output_bytes", io[ioNetOut])
	b.kv("total_net_repl_input_bytes", 0)
	b.kv("total_net_repl_output_bytes", 0)
	b.kv("instantaneous_input_kbps", fmt.Sprintf("%.2f", in/1024))
	b.kv("instantaneous_output_kbps", fmt.Sprintf("%.2f", out/1024))
	b.kv("instantaneous_input_repl_kbps", "0.00")
	b.kv("instantaneous_output_repl_kbps", "0.00")
	b.kv("rejected_connections", s.stats.rejected.Load()-a.rejBase.Load())
	b.kv("sync_full", 0)
	b.kv("sync_partial_ok", 0)
	b.kv("sync_partial_err", 0)
	b.kv("expired_subkeys", 0)
	b.kv("expired_keys", a.expired.Load())
	b.kv("expired_stale_perc", "0.00")
	b.kv("expired_time_cap_reached_count", 0)
	b.kv("expire_cycle_cpu_milliseconds", 0)
	b.kv("evicted_keys", 0)
	b.kv("evicted_clients", 0)
	b.kv("evicted_scripts", 0)
	b.kv("total_eviction_exceeded_time", 0)
	b.kv("current_eviction_exceeded_time", 0)
	hits, misses := s.lookups()
	b.kv("keyspace_hits", hits)
	b.kv("keyspace_misses", misses)
	b.kv("pubsub_channels", 0)
	b.kv("pubsub_patterns", 0)
	b.kv("pubsubshard_channels", 0)
	b.kv("latest_fork_usec", 0)
	b.kv("total_forks", 0)
	b.kv("migrate_cached_sockets", 0)
	b.kv("slave_expires_tracked_keys", 0)
	b.kv("active_defrag_hits", 0)
	b.kv("active_defrag_misses", 0)
	b.kv("active_defrag_key_hits", 0)
	b.kv("active_defrag_key_misses", 0)
	b.kv("total_active_defrag_time", 0)
	b.kv("current_active_defrag_time", 0)
	b.kv("tracking_total_keys", 0)
	b.kv("tracking_total_items", 0)
	b.kv("tracking_total_prefixes", 0)
	b.kv("unexpected_error_replies", 0)
	b.kv("total_error_replies", a.errors.Load())
	b.kv("dump_payload_sanitizations", 0)
	b.kv("total_reads_processed", io[ioReads])
	b.kv("total_writes_processed", io[ioWrites])
	b.kv("io_threaded_reads_processed", 0)
	b.kv("io_threaded_writes_processed", 0)
	b.kv("client_query_buffer_limit_disconnections", a.qbufDrop.Load())
	b.kv("client_output_buffer_limit_disconnections", a.obufDrop.Load())
	b.kv("acl_access_denied_auth", a.denied[0].Load())
	b.kv("acl_access_denied_cmd", a.denied[1].Load())
	b.kv("acl_access_denied_key", a.denied[2].Load())
	b.kv("acl_access_denied_channel", a.denied[3].Load())
}

func (s *Server) infoReplication(b *infoBuilder) {
	if s.cluster != nil {
		for _, f := range s.cluster.ReplicationInfo() {
			b.kv(f[0], f[1])
		}
		return
	}
	b.kv("role", "master")
	b.kv("connected_slaves", 0)
	b.kv("master_failover_state", "no-failover")
	b.kv("master_replid", s.adm.runID)
	b.kv("master_replid2", "0000000000000000000000000000000000000000")
	b.kv("master_repl_offset", 0)
	b.kv("second_repl_offset", -1)
	b.kv("repl_backlog_active", 0)
	b.kv("repl_backlog_size", 0)
	b.kv("repl_backlog_first_byte_offset", 0)
	b.kv("repl_backlog_histlen", 0)
}

func (s *Server) infoCPU(b *infoBuilder) {
	tv := func(t syscall.Timeval) string {
		return fmt.Sprintf("%d.%06d", t.Sec, t.Usec)
	}
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	b.kv("used_cpu_sys", tv(self.Stime))
	b.kv("used_cpu_user", tv(self.Utime))
	b.kv("used_cpu_sys_children", tv(children.Stime))
	b.kv("used_cpu_user_children", tv(children.Utime))
}

func (s *Server) infoModules(b *infoBuilder) {
	b.kv("module", fmt.Sprintf("name=bf,ver=%d,api=1,filters=0,usedby=[],using=[],options=[handle-io-errors]", ModuleVersion))
}

func (s *Server) infoCommandstats(b *infoBuilder) {
	eachStat(func(full string, sp *spec) {
		calls, failed, usec, rejected := s.sinceReset(sp)
		if calls == 0 && failed == 0 && rejected == 0 {
			return
		}
		per := 0.0
		if calls > 0 {
			per = float64(usec) / float64(calls)
		}
		b.kv("cmdstat_"+full, fmt.Sprintf("calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d",
			calls, usec, per, rejected, failed))
	})
}

func (s *Server) infoErrorstats(b *infoBuilder) {
	for _, e := range s.adm.errs.snapshot() {
		b.kv("errorstat_"+e[0].(string), fmt.Sprintf("count=%d", e[1]))
	}
}

func (s *Server) infoLatencystats(b *infoBuilder) {
	eachStat(func(full string, sp *spec) {
		h := s.histOf(sp)
		if h == nil {
			return
		}
		us := func(p float64) string { return fmt.Sprintf("%.3f", float64(h.percentile(p))/1000) }
		b.kv("latency_percentiles_usec_"+full, "p50="+us(50)+",p99="+us(99)+",p99.9="+us(99.9))
	})
}

func (s *Server) infoCluster(b *infoBuilder) { b.kv("cluster_enabled", 0) }

func (s *Server) infoKeyspace(b *infoBuilder) {
	st := s.backend.State()
	now := s.opts.Now().UnixMilli()
	for i := range keyspace.NumDBs {
		if keys, expires := st.Count(uint8(i), now); keys > 0 {
			// avg_ttl is Redis's estimate from its expiry cycle's samples;
			// bfserver's expiry does not sample, and reads 0 as Redis does
			// before it has an estimate.
			fmt.Fprintf(b, "db%d:keys=%d,expires=%d,avg_ttl=0,subexpiry=0\r\n", i, keys, expires)
		}
	}
}

// instMetrics is Redis's instantaneous metrics: every 100ms a sample of
// the rate since the last one; the rate reported is the mean of the last
// 16 samples.
type instMetrics struct {
	mu      sync.Mutex
	last    [3]int64
	lastAt  time.Time
	samples [3][16]float64
	idx     int
	n       int
}

func (m *instMetrics) tick(now time.Time, v [3]int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.lastAt.IsZero() {
		if dt := now.Sub(m.lastAt).Seconds(); dt > 0 {
			for i := range v {
				m.samples[i][m.idx] = float64(max(v[i]-m.last[i], 0)) / dt
			}
			m.idx = (m.idx + 1) % 16
			m.n = min(m.n+1, 16)
		}
	}
	m.last, m.lastAt = v, now
}

func (m *instMetrics) rates() (ops, in, out float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == 0 {
		return 0, 0, 0
	}
	var r [3]float64
	for i := range r {
		for j := range m.n {
			r[i] += m.samples[i][j]
		}
		r[i] /= float64(m.n)
	}
	return r[0], r[1], r[2]
}

func (m *instMetrics) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last, m.lastAt, m.samples, m.idx, m.n = [3]int64{}, time.Time{}, [3][16]float64{}, 0, 0
}

// sampleLoop feeds the instantaneous metrics and the peak memory.
func (s *Server) sampleLoop() {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			a := &s.adm
			io := s.ioTotals()
			a.inst.tick(now, [3]int64{s.processed(), io[ioNetIn], io[ioNetOut]})
			s.notePeak(readMem().heap)
		}
	}
}
