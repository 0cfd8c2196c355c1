#!/usr/bin/env python3
"""Capture RedisBloom 8.8.0 (Redis 8.0-m01 core) replies for bfserver's oracle tests.

Self-contained: standard library only. The RESP client below is a copy of
/work/shared/oracle-tools/resp.py (trimmed). Every area runs on a fresh server:
with --launch the script starts one per area on --port (and kills it by PID
afterwards); without it, point --port at a fresh server you started yourself
(the script FLUSHALLs it and changes ACL users and configs).

    python3 capture.py --launch /work/shared/anchors/start-redisbloom --port 7400 \
        --out . [area ...]

Areas: commanddocs acl memusage watch edge admin (default: all of them).
Output: one <area>.jsonl per area, in the record format of testdata/golden
(see README.md in this folder for the extra fields).
"""
import argparse
import base64
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# ---------------------------------------------------------------------------
# RESP client (copied from oracle-tools/resp.py)


class ProtocolError(Exception):
    pass


class RespError(bytes):
    """An error reply (kept as bytes, without the leading '-')."""


class RespMap(list):
    """A RESP3 map, kept as a flat [k1, v1, k2, v2, ...] list."""

    def as_dict(self):
        return {self[i]: self[i + 1] for i in range(0, len(self), 2)}


def to_bytes(a):
    if isinstance(a, bytes):
        return a
    if isinstance(a, str):
        return a.encode()
    if isinstance(a, (int, float)):
        return str(a).encode()
    raise TypeError(type(a))


def encode_command(args):
    out = [b'*%d\r\n' % len(args)]
    for a in args:
        a = to_bytes(a)
        out.append(b'$%d\r\n' % len(a))
        out.append(a)
        out.append(b'\r\n')
    return b''.join(out)


class Conn:
    def __init__(self, port, host='127.0.0.1', timeout=60):
        self.s = socket.create_connection((host, port), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.pos = 0

    def close(self):
        self.s.close()

    def _fill(self):
        d = self.s.recv(1 << 20)
        if not d:
            raise ConnectionError('server closed the connection')
        if self.pos > (1 << 20):
            del self.buf[:self.pos]
            self.pos = 0
        self.buf += d

    def _line(self):
        while True:
            i = self.buf.find(b'\r\n', self.pos)
            if i >= 0:
                line = bytes(self.buf[self.pos:i + 2])
                self.pos = i + 2
                return line
            self._fill()

    def _n(self, n):
        while len(self.buf) - self.pos < n:
            self._fill()
        d = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return d

    def read_frame(self):
        """Read one reply. Returns (raw_bytes, parsed_value)."""
        line = self._line()
        t = line[:1]
        body = line[1:-2]
        if t == b'+':
            return line, bytes(body)
        if t == b'-':
            return line, RespError(body)
        if t == b':':
            return line, int(body)
        if t == b'_':
            return line, None
        if t == b'#':
            return line, body == b't'
        if t == b',':
            return line, float(body)
        if t == b'(':
            return line, int(body)
        if t in (b'$', b'=', b'!'):
            n = int(body)
            if n < 0:
                return line, None
            d = self._n(n + 2)
            if d[-2:] != b'\r\n':
                raise ProtocolError('bad bulk terminator')
            v = d[:-2]
            if t == b'!':
                v = RespError(v)
            return line + d, v
        if t in (b'*', b'~', b'>', b'%', b'|'):
            n = int(body)
            if n < 0:
                return line, None
            cnt = n * 2 if t in (b'%', b'|') else n
            raw = [line]
            items = []
            for _ in range(cnt):
                r, p = self.read_frame()
                raw.append(r)
                items.append(p)
            if t == b'|':
                r, p = self.read_frame()
                raw.append(r)
                return b''.join(raw), p
            if t == b'%':
                return b''.join(raw), RespMap(items)
            return b''.join(raw), items
        raise ProtocolError('unexpected reply type %r' % line[:40])

    def send(self, args):
        self.s.sendall(encode_command(args))

    def call(self, *args):
        self.send(args)
        return self.read_frame()


def is_text(b):
    if b'\x00' in b:
        return False
    try:
        b.decode('utf-8')
        return True
    except UnicodeDecodeError:
        return False


def encode_args(args):
    bs = [to_bytes(a) for a in args]
    if all(is_text(b) for b in bs):
        return {'args': [b.decode('utf-8') for b in bs]}
    return {'args_b64': [base64.b64encode(b).decode('ascii') for b in bs]}


def encode_reply(raw):
    if is_text(raw):
        return {'reply': raw.decode('utf-8')}
    return {'reply_b64': base64.b64encode(raw).decode('ascii')}


def decode_args(rec):
    if 'args' in rec:
        return [a.encode('utf-8') for a in rec['args']]
    return [base64.b64decode(a) for a in rec['args_b64']]


def dumps(rec):
    return json.dumps(rec, ensure_ascii=False, separators=(', ', ': '))


# ---------------------------------------------------------------------------
# Recorder: named connections, protocol tracking, one JSONL file


class Recorder:
    def __init__(self, port, path):
        self.port = port
        self.f = open(path, 'w')
        self.conns = {}
        self.proto = {}
        self.count = 0
        self.section = None

    def close(self):
        for c in self.conns.values():
            try:
                c.close()
            except OSError:
                pass
        self.f.close()

    def c(self, name):
        if name not in self.conns:
            self.conns[name] = Conn(self.port)
            self.proto[name] = 2
        return self.conns[name]

    def drop(self, name):
        c = self.conns.pop(name, None)
        self.proto.pop(name, None)
        if c:
            c.close()

    def write(self, rec):
        if self.section and 'section' not in rec:
            rec['section'] = self.section
        self.f.write(dumps(rec) + '\n')
        self.count += 1

    def do(self, *args, conn='main', volatile=False, unordered=False, note=None,
           sleep_ms=None, noreply=False, expect_close=False, **extra):
        """Send one command on a named connection and record its reply."""
        c = self.c(conn)
        if sleep_ms:
            time.sleep(sleep_ms / 1000.0)
        rec = encode_args(args)
        raw = val = None
        closed = False
        c.send(args)
        if not noreply:
            try:
                raw, val = c.read_frame()
            except (ConnectionError, socket.timeout, OSError):
                closed = True
        name = to_bytes(args[0]).upper() if args else b''
        if raw is not None and not isinstance(val, RespError):
            if name == b'HELLO' and len(args) > 1:
                self.proto[conn] = int(args[1])
            if name == b'RESET':
                self.proto[conn] = 2
        if raw is not None:
            rec.update(encode_reply(raw))
        if self.section:
            rec['section'] = self.section
        if conn != 'main':
            rec['conn'] = conn
        rec['proto'] = self.proto.get(conn, 2)
        for k, v in (('volatile', volatile), ('unordered', unordered), ('note', note),
                     ('sleep_ms', sleep_ms), ('noreply', noreply), ('closed', closed)):
            if v:
                rec[k] = v
        for k, v in extra.items():
            if v is not None:
                rec[k] = v
        if closed and not expect_close:
            print('  connection %s closed after %r' % (conn, args[:3]), file=sys.stderr)
        if closed:
            self.drop(conn)
        self.write(rec)
        return val

    def recv(self, conn, volatile=True, note=None):
        """Record one unsolicited frame (MONITOR lines, pushes)."""
        raw, val = self.c(conn).read_frame()
        rec = {'recv': True}
        rec.update(encode_reply(raw))
        rec['conn'] = conn
        rec['proto'] = self.proto[conn]
        if volatile:
            rec['volatile'] = True
        if note:
            rec['note'] = note
        self.write(rec)
        return val

    def silent(self, *args, conn='main'):
        """Run a command without recording it (setup only)."""
        return self.c(conn).call(*args)[1]

    def hello3(self, conn):
        self.do('HELLO', '3', conn=conn, volatile=True, note='switch the connection to RESP3')


def s(v):
    return v.decode() if isinstance(v, bytes) else v


# ---------------------------------------------------------------------------
# Area 1: COMMAND DOCS / INFO / LIST / COUNT / GETKEYS

# Core commands bfserver registers (grep register( conn( keyCmd( module( in
# resp/*.go), then the ones the brief adds, then a few cheap extras.
CORE = '''ping echo hello auth select quit reset multi exec discard watch unwatch wait
info config module client command readonly lastsave time del unlink exists type rename
renamenx copy expire pexpire expireat pexpireat persist ttl pttl keys scan dbsize randomkey
flushdb flushall set get dump restore object memory
acl slowlog latency shutdown monitor save bgsave debug
touch expiretime pexpiretime role bgrewriteaof replicaof slaveof swapdb move readwrite
publish subscribe'''.split()

GETKEYS = [
    ['BF.RESERVE', 'k', '0.01', '100'], ['BF.ADD', 'k', 'x'], ['BF.MADD', 'k', 'a', 'b'],
    ['BF.INSERT', 'k', 'CAPACITY', '10', 'ITEMS', 'a', 'b'], ['BF.EXISTS', 'k', 'x'],
    ['BF.MEXISTS', 'k', 'a', 'b'], ['BF.INFO', 'k'], ['BF.INFO', 'k', 'CAPACITY'],
    ['BF.CARD', 'k'], ['BF.SCANDUMP', 'k', '0'], ['BF.LOADCHUNK', 'k', '1', 'xx'],
    ['BF.DEBUG', 'k'], ['BF.DEBUG'], ['BF.DEBUG', 'k', 'x', 'y'],
    ['CF.RESERVE', 'k', '100'], ['CF.ADD', 'k', 'x'], ['CF.ADDNX', 'k', 'x'],
    ['CF.INSERT', 'k', 'ITEMS', 'a'], ['CF.INSERTNX', 'k', 'NOCREATE', 'ITEMS', 'a', 'b'],
    ['CF.EXISTS', 'k', 'x'], ['CF.MEXISTS', 'k', 'a', 'b'], ['CF.COUNT', 'k', 'x'],
    ['CF.DEL', 'k', 'x'], ['CF.INFO', 'k'], ['CF.SCANDUMP', 'k', '0'],
    ['CF.LOADCHUNK', 'k', '1', 'xx'], ['CF.COMPACT', 'k'], ['CF.COMPACT'], ['CF.DEBUG', 'k'],
    ['bf.add', 'k', 'x'], ['Cf.Add', 'k', 'x'],
    # arity, unknown, no keys
    ['BF.ADD', 'k'], ['BF.ADD', 'k', 'x', 'y'], ['CF.RESERVE', 'k'], ['NOSUCH', 'k'],
    ['PING'], ['PING', 'x'],
    # core
    ['DEL', 'a', 'b', 'c'], ['UNLINK', 'a'], ['EXISTS', 'a', 'b'], ['TYPE', 'a'],
    ['RENAME', 'a', 'b'], ['RENAMENX', 'a', 'b'], ['COPY', 'a', 'b'], ['COPY', 'a', 'b', 'DB', '1', 'REPLACE'],
    ['EXPIRE', 'a', '10'], ['PEXPIREAT', 'a', '10', 'NX'], ['PERSIST', 'a'], ['TTL', 'a'],
    ['SET', 'a', 'v'], ['SET', 'a', 'v', 'GET'], ['GET', 'a'], ['DUMP', 'a'],
    ['RESTORE', 'a', '0', 'xx'], ['MEMORY', 'USAGE', 'a'], ['MEMORY', 'USAGE', 'a', 'SAMPLES', '0'],
    ['OBJECT', 'ENCODING', 'a'], ['WATCH', 'a', 'b'], ['TOUCH', 'a', 'b'],
    ['KEYS', '*'], ['SCAN', '0'], ['DBSIZE'], ['FLUSHALL'], ['CONFIG', 'GET', 'x'],
    ['MEMORY', 'USAGE'], ['MEMORY'], ['MEMORY', 'NOSUCH', 'a'], ['OBJECT', 'ENCODING'],
]
GETKEYSANDFLAGS = [
    ['BF.ADD', 'k', 'x'], ['BF.EXISTS', 'k', 'x'], ['BF.SCANDUMP', 'k', '0'], ['BF.DEBUG', 'k'],
    ['CF.DEL', 'k', 'x'], ['CF.COMPACT', 'k'], ['CF.LOADCHUNK', 'k', '1', 'x'],
    ['DEL', 'a', 'b'], ['RENAME', 'a', 'b'], ['COPY', 'a', 'b'], ['SET', 'a', 'v'],
    ['GET', 'a'], ['MEMORY', 'USAGE', 'a'], ['WATCH', 'a'], ['EXISTS', 'a', 'b'],
    ['PING'], ['NOSUCH', 'a'], ['BF.ADD', 'k'],
]


def area_commanddocs(r):
    main = r.c('main')
    bfcf = sorted(s(x) for x in main.call('COMMAND', 'LIST', 'FILTERBY', 'PATTERN', 'bf.*')[1]) + \
        sorted(s(x) for x in main.call('COMMAND', 'LIST', 'FILTERBY', 'PATTERN', 'cf.*')[1])
    names = []
    for n in bfcf + CORE:
        names.append(n)
        info = main.call('COMMAND', 'INFO', n)[1][0]
        if info is None:
            print('  no such command', n, file=sys.stderr)
            names.pop()
            continue
        for sub in sorted(s(x[0]) for x in info[9]):
            names.append(sub)
    for proto in (2, 3):
        conn = 'p%d' % proto
        if proto == 3:
            r.hello3(conn)
        r.section = 'docs'
        for n in names:
            container = '|' not in n and n in [x.split('|')[0] for x in names if '|' in x]
            extra = {'subcommands_unordered': True} if container else {}
            r.do('COMMAND', 'DOCS', n, conn=conn, **extra)
            r.do('COMMAND', 'INFO', n, conn=conn, **extra)
        r.section = 'docs-forms'
        r.do('COMMAND', 'DOCS', 'BF.ADD', conn=conn)
        r.do('COMMAND', 'DOCS', 'bf.add', 'cf.add', 'nosuch', 'bf.card', conn=conn)
        r.do('COMMAND', 'DOCS', 'nosuch', conn=conn)
        r.do('COMMAND', 'DOCS', 'config|nosuch', conn=conn)
        r.do('COMMAND', 'DOCS', 'CONFIG|GET', conn=conn)
        r.do('COMMAND', 'DOCS', 'get|x', conn=conn)
        r.do('COMMAND', 'INFO', 'bf.add', 'nosuch', 'CF.ADD', conn=conn)
        r.do('COMMAND', 'INFO', 'nosuch', conn=conn)
        r.do('COMMAND', 'INFO', 'config|nosuch', conn=conn)
        r.do('COMMAND', 'INFO', 'CONFIG|GET', 'client|list', conn=conn)
        r.do('COMMAND', 'INFO', 'get|x', conn=conn)
        r.section = 'count-list'
        r.do('COMMAND', 'COUNT', conn=conn, volatile=True,
             note='302 commands on this core with all of RedisBloom (bf, cf, cms, topk, tdigest)')
        r.do('COMMAND', 'COUNT', 'x', conn=conn)
        r.do('COMMAND', 'LIST', conn=conn, volatile=True, unordered=True, subset=True)
        r.do('COMMAND', 'LIST', 'x', conn=conn)
        for filt in (['MODULE', 'bf'], ['MODULE', 'BF'], ['module', 'bf'], ['MODULE', 'nosuch'],
                     ['ACLCAT', 'bloom'], ['ACLCAT', 'cuckoo'], ['ACLCAT', 'BLOOM'], ['ACLCAT', 'keyspace'],
                     ['ACLCAT', 'connection'], ['ACLCAT', 'transaction'], ['ACLCAT', 'nosuch'],
                     ['PATTERN', 'bf.*'], ['PATTERN', 'cf.*'], ['PATTERN', 'BF.*'], ['PATTERN', 'b?.add'],
                     ['PATTERN', '*exists*'], ['PATTERN', 'nomatch*'], ['PATTERN', 'config|*'],
                     ['PATTERN', 'config*'], ['PATTERN', 'client|s*']):
            r.do('COMMAND', 'LIST', 'FILTERBY', *filt, conn=conn, unordered=True, subset=True)
        r.do('COMMAND', 'LIST', 'FILTERBY', conn=conn)
        r.do('COMMAND', 'LIST', 'FILTERBY', 'MODULE', conn=conn)
        r.do('COMMAND', 'LIST', 'FILTERBY', 'BOGUS', 'x', conn=conn)
        r.do('COMMAND', 'LIST', 'FILTERBY', 'MODULE', 'bf', 'x', conn=conn)
        r.do('COMMAND', 'LIST', 'FILTERBY', 'PATTERN', 'bf.*', 'ACLCAT', 'bloom', conn=conn)
        r.section = 'getkeys'
        for a in GETKEYS:
            r.do('COMMAND', 'GETKEYS', *a, conn=conn)
        r.do('COMMAND', 'GETKEYS', conn=conn)
        for a in GETKEYSANDFLAGS:
            r.do('COMMAND', 'GETKEYSANDFLAGS', *a, conn=conn)
        r.do('COMMAND', 'GETKEYSANDFLAGS', conn=conn)
        r.section = 'misc'
        r.do('COMMAND', 'HELP', conn=conn)
        r.do('COMMAND', 'help', conn=conn)
        r.do('COMMAND', 'HELP', 'x', conn=conn)
        r.do('COMMAND', 'NOSUCH', conn=conn)
        r.do('COMMAND', 'DOCS', 'command', conn=conn, subcommands_unordered=True)


# ---------------------------------------------------------------------------
# Area 2: ACL


def area_acl(r):
    r.section = 'cat'
    cats = r.do('ACL', 'CAT')
    r.do('ACL', 'CAT', conn='r3') if False else None
    r.hello3('r3')
    r.do('ACL', 'CAT', conn='r3')
    for cat in cats:
        r.do('ACL', 'CAT', s(cat), unordered=True)
    r.do('ACL', 'CAT', 'BLOOM', unordered=True)
    r.do('ACL', 'CAT', 'bloom', conn='r3', unordered=True)
    r.do('ACL', 'CAT', 'nosuch')
    r.do('ACL', 'CAT', 'bloom', 'x')

    r.section = 'setuser'

    def su(user, *rules, **kw):
        v = r.do('ACL', 'SETUSER', user, *rules, **kw)
        if rules in (('%~bad',), ('%R',)) and v == b'OK':
            # 8.0-m01 accepts a selector flag set that is empty and then
            # panics on ACL GETUSER/LIST ("Invalid key pattern flag
            # detected", acl.c:336). Drop the pattern before looking.
            r.do('ACL', 'SETUSER', user, 'resetkeys', note='after %r: 8.0-m01 crashes on ACL GETUSER/LIST '
                 'while this pattern is set (Guru Meditation: Invalid key pattern flag detected #acl.c:336)' % rules[0])
        r.do('ACL', 'GETUSER', user)
        r.do('ACL', 'GETUSER', user, conn='r3')
        return v

    su('u1')
    for rule in (['on'], ['off'], ['>pass1'], ['>pass2', '>pass1'], ['<pass2'], ['<nosuch'],
                 ['#' + 'a' * 64], ['#' + 'A' * 64], ['#abc'], ['#' + 'g' * 64], ['!' + 'a' * 64],
                 ['nopass'], ['resetpass'], ['>p', 'nopass', '>q'],
                 ['~k*'], ['~k*', '~k*'], ['%R~r*'], ['%W~w*'], ['%RW~rw*'], ['%WR~x*'], ['%r~lower*'],
                 ['%X~bad*'], ['%~bad'], ['%R'], ['allkeys'], ['~x', 'allkeys', '~y'],
                 ['resetkeys'], ['~a', 'resetkeys', '~b'],
                 ['&ch*'], ['allchannels'], ['resetchannels'], ['&a', 'resetchannels', '&b'],
                 ['+bf.add'], ['+BF.MADD'], ['-bf.add'], ['+@bloom'], ['-@bloom'], ['+@cuckoo'],
                 ['-@cuckoo'], ['+@read'], ['-@write'], ['+@all'], ['-@all'],
                 ['+config|get'], ['-config|get'], ['+config|set', '-config'], ['+client|setname'],
                 ['+select|0'], ['-select|0'], ['+bf.add|x'], ['+config|get|x'], ['+config|nosuch'],
                 ['+nosuch'], ['-nosuch'], ['+@nosuch'], ['-@nosuch'], ['+'], ['-'], ['+@'],
                 ['allcommands'], ['nocommands'], ['allcommands', '-@dangerous', '+info'],
                 ['on', '>pw', '~k*', '+@bloom', '(~s* +bf.exists)'],
                 ['(%R~r* +@read)'], ['(~x* +get', 'resetkeys)'], ['(on)'], ['(>p)'], ['(nopass)'],
                 ['(~x* +nosuch)'], ['(~x'], ['~x)'], ['()'], ['( ~x* )'], ['(bogus)'],
                 ['clearselectors'], ['(~a +get)', '(~b +set)'],
                 ['reset'], ['bogus'], ['on', 'bogus', 'off'], ['ON'], ['NOPASS'], ['ALLKEYS'],
                 ['skip-sanitize-payload'], ['sanitize-payload'], ['ALLCOMMANDS'], ['RESET']):
        su('u1', *rule)
    su('u1', 'reset')
    su('u2', 'on', 'nopass', '+@all', '~*', '&*')
    r.do('ACL', 'SETUSER', 'bad name')
    r.do('ACL', 'SETUSER', 'u3', 'on', '+@bloom', 'bogus')
    r.do('ACL', 'GETUSER', 'u3')
    r.do('ACL', 'SETUSER')
    r.do('ACL', 'GETUSER', 'nosuch')
    r.do('ACL', 'GETUSER', 'nosuch', conn='r3')
    r.do('ACL', 'GETUSER', 'default')
    r.do('ACL', 'GETUSER', 'default', conn='r3')
    r.do('ACL', 'GETUSER')

    r.section = 'list'
    r.do('ACL', 'SETUSER', 'alice', 'on', '>apw', '~bf:*', '%R~ro:*', '&news', '+@bloom', '-bf.reserve',
         '+@cuckoo', '-cf.del', '+config|get', '+ping', '+acl|whoami', '+multi', '+exec', '+discard', '+auth')
    r.do('ACL', 'SETUSER', 'bob', 'on', 'nopass', 'allkeys', '+@read', '-@dangerous')
    r.do('ACL', 'SETUSER', 'carol', 'off', '>cpw', '+@all', '~*')
    r.do('ACL', 'LIST')
    r.do('ACL', 'LIST', conn='r3')
    r.do('ACL', 'LIST', 'x')
    r.do('ACL', 'USERS')
    r.do('ACL', 'USERS', conn='r3')
    r.do('ACL', 'WHOAMI')
    r.do('ACL', 'WHOAMI', conn='r3')
    r.do('ACL', 'WHOAMI', 'x')

    r.section = 'dryrun'
    for a in (['alice', 'bf.add', 'bf:1', 'x'], ['alice', 'bf.add', 'other', 'x'],
              ['alice', 'bf.exists', 'ro:1', 'x'], ['alice', 'bf.add', 'ro:1', 'x'],
              ['alice', 'bf.reserve', 'bf:1', '0.01', '100'], ['alice', 'cf.add', 'bf:c', 'x'],
              ['alice', 'cf.del', 'bf:c', 'x'], ['alice', 'cf.exists', 'nope', 'x'],
              ['alice', 'bf.madd', 'bf:1', 'a', 'b'], ['alice', 'bf.insert', 'bf:1', 'ITEMS', 'a'],
              ['alice', 'config', 'get', 'maxmemory'], ['alice', 'config', 'set', 'maxmemory', '0'],
              ['alice', 'config', 'resetstat'], ['alice', 'get', 'bf:1'], ['alice', 'ping'],
              ['alice', 'publish', 'news', 'x'], ['alice', 'publish', 'other', 'x'],
              ['alice', 'subscribe', 'other'], ['alice', 'del', 'bf:1'],
              ['alice', 'BF.ADD', 'bf:1', 'x'], ['alice', 'bf.add', 'bf:1'], ['alice', 'nosuch'],
              ['alice', 'bf.add'], ['nosuch', 'ping'], ['alice'], ['bob', 'bf.exists', 'k', 'x'],
              ['bob', 'bf.add', 'k', 'x'], ['bob', 'flushall'], ['bob', 'keys', '*'],
              ['carol', 'ping'], ['default', 'bf.add', 'k', 'x'], ['alice', 'bf.debug', 'bf:1'],
              ['alice', 'cf.compact', 'bf:c'], ['alice', 'rename', 'bf:a', 'bf:b'],
              ['alice', 'copy', 'bf:a', 'x'], ['alice', 'multi'], ['alice', 'exec']):
        r.do('ACL', 'DRYRUN', *a)
    r.do('ACL', 'DRYRUN', 'alice', 'bf.add', 'other', 'x', conn='r3')

    r.section = 'noperm'
    r.do('ACL', 'LOG', 'RESET')
    r.do('AUTH', 'alice', 'apw', conn='alice')
    r.do('ACL', 'WHOAMI', conn='alice')
    for a in (['BF.ADD', 'bf:1', 'x'], ['BF.ADD', 'other', 'x'], ['BF.RESERVE', 'bf:2', '0.01', '100'],
              ['BF.EXISTS', 'ro:1', 'x'], ['BF.ADD', 'ro:1', 'x'], ['BF.MADD', 'bf:1', 'a', 'b'],
              ['CF.ADD', 'bf:c', 'x'], ['CF.DEL', 'bf:c', 'x'], ['CF.EXISTS', 'other', 'x'],
              ['CONFIG', 'GET', 'maxmemory'], ['CONFIG', 'SET', 'maxmemory', '0'], ['CONFIG', 'HELP'],
              ['GET', 'bf:1'], ['PUBLISH', 'news', 'x'], ['PUBLISH', 'other', 'x'],
              ['SUBSCRIBE', 'other'], ['DEL', 'bf:1'], ['PING'], ['NOSUCH', 'x'], ['BF.ADD', 'bf:1'],
              ['ACL', 'WHOAMI'], ['ACL', 'LIST'], ['CLIENT', 'ID']):
        r.do(*a, conn='alice')
    r.section = 'noperm-multi'
    r.do('MULTI', conn='alice')
    r.do('BF.ADD', 'bf:1', 'x', conn='alice')
    r.do('BF.ADD', 'other', 'x', conn='alice')
    r.do('CONFIG', 'SET', 'maxmemory', '0', conn='alice')
    r.do('EXEC', conn='alice')
    r.do('MULTI', conn='alice')
    r.do('BF.ADD', 'bf:1', 'y', conn='alice')
    r.do('EXEC', conn='alice')
    r.do('MULTI', conn='alice')
    r.do('GET', 'x', conn='alice')
    r.do('DISCARD', conn='alice')
    r.hello3('alice3')
    r.do('AUTH', 'alice', 'apw', conn='alice3')
    r.do('BF.ADD', 'other', 'x', conn='alice3')
    r.do('CONFIG', 'SET', 'maxmemory', '0', conn='alice3')

    r.section = 'log'
    vf = ['age-seconds', 'client-info', 'timestamp-created', 'timestamp-last-updated', 'entry-id']
    r.do('ACL', 'LOG', volatile=True, volatile_fields=vf)
    r.do('ACL', 'LOG', '2', volatile=True, volatile_fields=vf)
    r.do('ACL', 'LOG', conn='r3', volatile=True, volatile_fields=vf)
    r.do('ACL', 'LOG', '0')
    r.do('ACL', 'LOG', '-1')
    r.do('ACL', 'LOG', 'abc')
    r.do('ACL', 'LOG', 'RESET', 'x')
    r.do('ACL', 'LOG', 'RESET')
    r.do('ACL', 'LOG')
    r.do('AUTH', 'alice', 'wrong', conn='x1')
    r.do('AUTH', 'carol', 'cpw', conn='x1')
    r.do('ACL', 'LOG', volatile=True, volatile_fields=vf, note='auth failures')
    r.do('ACL', 'LOG', 'RESET')

    r.section = 'auth'
    for a in (['AUTH', 'carol', 'cpw'], ['AUTH', 'carol', 'wrong'], ['AUTH', 'nosuch', 'x'],
              ['AUTH', 'bob', 'anything'], ['AUTH', 'alice', 'wrong'], ['AUTH', 'x'],
              ['AUTH', 'a', 'b', 'c']):
        r.do(*a, conn='x2')
    r.do('ACL', 'WHOAMI', conn='x2')
    for a in (['HELLO', '3', 'AUTH', 'carol', 'cpw'], ['HELLO', '2', 'AUTH', 'carol', 'cpw'],
              ['HELLO', '3', 'AUTH', 'alice', 'wrong'], ['HELLO', '3', 'AUTH', 'nosuch', 'x']):
        r.do(*a, conn='x3')
    r.do('HELLO', '3', 'AUTH', 'alice', 'apw', conn='x3', volatile=True)
    r.do('ACL', 'WHOAMI', conn='x3')
    r.do('ACL', 'SETUSER', 'alice', 'off')
    r.do('PING', conn='alice', note='alice was disabled: existing connections stay')
    r.do('AUTH', 'alice', 'apw', conn='x4')
    r.do('ACL', 'SETUSER', 'alice', 'on')
    r.do('ACL', 'SETUSER', 'default', 'off')
    r.do('PING', conn='x5', note='default user off: a new connection is not authenticated')
    r.do('AUTH', 'alice', 'apw', conn='x5')
    r.do('ACL', 'SETUSER', 'default', 'on')
    r.do('ACL', 'SETUSER', 'default', '>defpw', 'resetpass', 'nopass')

    r.section = 'genpass'
    for a in ([], ['32'], ['5'], ['1'], ['4096'], ['0'], ['4097'], ['-1'], ['abc']):
        raw, v = r.c('main').call('ACL', 'GENPASS', *a)
        rec = encode_args(['ACL', 'GENPASS'] + a)
        rec.update(encode_reply(raw))
        rec.update({'section': r.section, 'proto': 2})
        if isinstance(v, RespError):
            r.write(rec)
            continue
        rec.update({'volatile': True, 'length': len(v),
                    'note': 'random lowercase hex; length = ceil(bits/4)'})
        r.write(rec)
    r.section = 'saveload'
    r.do('ACL', 'SAVE')
    r.do('ACL', 'LOAD')
    r.do('ACL', 'SAVE', 'x')
    r.do('ACL', 'HELP')
    r.do('ACL', 'NOSUCH')
    r.do('ACL')

    r.section = 'deluser'
    r.do('ACL', 'DELUSER', 'default')
    r.do('ACL', 'DELUSER', 'u1', 'nosuch', 'u2')
    r.do('ACL', 'DELUSER', 'nosuch')
    r.do('ACL', 'DELUSER', 'alice', 'default')
    r.do('ACL', 'DELUSER', 'alice')
    r.do('PING', conn='alice', note='a deleted user\'s connections are closed', expect_close=True)
    r.do('ACL', 'DELUSER')
    r.do('ACL', 'USERS')


# ---------------------------------------------------------------------------
# Area 3: MEMORY USAGE of every dump recipe


def load_recipes():
    out = []
    with open(os.path.join(HERE, '..', 'golden', 'dumps.jsonl')) as f:
        for line in f:
            out.append(json.loads(line))
    return out


def area_memusage(r):
    main = r.c('main')
    for rec in load_recipes():
        main.call('FLUSHALL')
        for cmd in rec['recipe']:
            raw, _ = main.call(*decode_args(cmd))
            want = cmd.get('reply', '').encode() if 'reply' in cmd else base64.b64decode(cmd['reply_b64'])
            if raw != want:
                print('  recipe %s: reply differs' % rec['name'], file=sys.stderr)
        key = rec['key']
        r.section = rec['name']
        r.do('MEMORY', 'USAGE', key, recipe=rec['name'], type=rec['type'])
        r.do('MEMORY', 'USAGE', key, 'SAMPLES', '0', recipe=rec['name'], type=rec['type'])
        info = main.call('BF.INFO' if rec['type'] == 'bf' else 'CF.INFO', key)[1]
        d = {s(info[i]): info[i + 1] for i in range(0, len(info), 2)}
        r.do('BF.INFO' if rec['type'] == 'bf' else 'CF.INFO', key, recipe=rec['name'], type=rec['type'],
             note='Size %s' % d.get('Size'))
    r.section = 'other'
    r.do('FLUSHALL')
    for args in (['BF.RESERVE', 'k', '0.01', '100'], ['BF.ADD', 'kk', 'x'], ['CF.RESERVE', 'c', '1024'],
                 ['CF.ADD', 'cc', 'x'], ['SET', 's', 'v'], ['BF.ADD', 'a' * 40, 'x'],
                 ['BF.RESERVE', 'big', '0.001', '1000000']):
        r.do(*args)
    for k in ('k', 'kk', 'c', 'cc', 's', 'a' * 40, 'big', 'nosuch'):
        r.do('MEMORY', 'USAGE', k)
    r.do('MEMORY', 'USAGE', 'k', 'SAMPLES', '5')
    r.do('MEMORY', 'USAGE', 'k', 'SAMPLES')
    r.do('MEMORY', 'USAGE', 'k', 'SAMPLES', 'x')
    r.do('MEMORY', 'USAGE', 'k', 'SAMPLES', '-1')
    r.do('MEMORY', 'USAGE', 'k', 'BOGUS', '1')
    r.do('MEMORY', 'USAGE')
    r.hello3('r3')
    r.do('MEMORY', 'USAGE', 'k', conn='r3')
    r.do('MEMORY', 'USAGE', 'nosuch', conn='r3')


def area_memkeys(r):
    """MEMORY USAGE by key length (sds header types and jemalloc classes) and
    of string values of every encoding, including the big-argument path."""
    r.section = 'key-length'
    lens = list(range(1, 140)) + [200, 250, 251, 252, 253, 254, 255, 256, 257, 300, 500, 1000, 4000,
                                  10000, 14330, 14340, 20000, 65530, 65531]
    for n in lens:
        k = 'a' * n
        r.do('BF.ADD', k, 'x')
        r.do('MEMORY', 'USAGE', k)
        r.do('DEL', k)
    for n in (1, 31, 32, 253):
        k = 'c' * n
        r.do('CF.ADD', k, 'x')
        r.do('MEMORY', 'USAGE', k)
        r.do('DEL', k)
    r.section = 'string-value'
    vals = ['v', '12', '9999', '10000', '-5', '0', '-0', '+1', '01', '1.5', ' 1',
            '123456789012345678', '12345678901234567890', '9223372036854775807',
            '9223372036854775808', '-9223372036854775808']
    vals += ["x" * n for n in (0, 2, 4, 5, 20, 40, 43, 44, 45, 46, 60, 100, 252, 253, 1000, 32762,
                               32763, 32768, 40954, 40955, 65528, 65529)]
    for v in vals:
        r.do('SET', 's', v)
        r.do('MEMORY', 'USAGE', 's', note='value of %d bytes' % len(v))
        r.do('OBJECT', 'ENCODING', 's')
    r.do('DEL', 's')


def area_headers(r):
    """BF dump headers beyond edge.jsonl: hash counts RedisBloom 8.8 derives
    from odd bits-per-entry, a negative NaN error, full links that must grow
    (and cannot), nfilters 0, all option bits, more items than capacity; and
    CF headers: expansion 32768/32769, a non-power-of-two expansion, many
    sub-filters, bucket counts from 2^31 to 2^55."""
    import math
    def bfh(csize=1, n=1, opts=5, growth=2, **l):
        d = dict(bytes=16, bits=128, size=1, error=0.005, bpe=None, hashes=8, entries=10, n2=0)
        d.update(l)
        if d['bpe'] is None:
            d['bpe'] = -(math.log(0.005) / 0.480453013918201)
        return struct.pack('<QIII', csize, n, opts, growth) + struct.pack(
            '<QQQddIQB', d['bytes'], d['bits'], d['size'], d['error'], d['bpe'], d['hashes'], d['entries'], d['n2'])
    negnan = struct.unpack('<d', struct.pack('<Q', 0xfff8000000000000))[0]
    r.section = 'bf-headers'
    cases = [
        ('bpe-neg-h0', bfh(bpe=-0.01, hashes=0), 'bpe -0.01, hashes 0', True),
        ('bpe0-h0', bfh(bpe=0.0, hashes=0), 'bpe 0, hashes 0', True),
        ('bpe-nan-h2^31', bfh(bpe=float('nan'), hashes=0x80000000), 'bpe NaN, hashes 2^31', False),
        ('bpe1e9', bfh(bpe=1e9, hashes=math.ceil(0.693147180559945 * 1e9)), 'bpe 1e9, hashes 693147181', False),
        ('bpe-h2000', bfh(bpe=2000 / 0.693147180559945 - 0.3, hashes=2000), 'hashes 2000', False),
        ('bpe-h1100', bfh(bpe=1100 / 0.693147180559945 - 0.3, hashes=1100), 'hashes 1100', True),
        ('nf0-size0', struct.pack('<QIII', 0, 0, 5, 2), 'nfilters 0, size 0, no links', True),
        ('neg-nan', bfh(error=negnan), 'error -NaN', True),
        ('nan-full', bfh(error=float('nan'), entries=1), 'error NaN, full: cannot grow', True),
        ('full-2^40', bfh(csize=1 << 40, size=1 << 40, entries=1 << 40),
         'full link of 2^40: the next link is 3.4 TB', False),
        ('full-2^50', bfh(csize=1 << 50, size=1 << 50, entries=1 << 50), 'the next link cannot be allocated', True),
        ('full-2^62-g4', bfh(csize=1 << 62, growth=4, size=1 << 62, entries=1 << 62),
         'entries x growth wraps to 0', True),
        ('full-g0', bfh(growth=0, entries=1), 'growth 0, full', True),
        ('opts7', bfh(opts=7), 'options NOROUND|ENTS_IS_BITS|FORCE64', True),
        ('size-gt-entries', bfh(csize=20, size=20), 'size 20 > capacity 10', True),
    ]
    for key, h, note, probe in cases:
        r.do('BF.LOADCHUNK', key, 1, h, note=note)
        r.do('BF.INFO', key)
        r.do('BF.DEBUG', key)
        if probe:  # not on links whose hash count would make an add loop for seconds
            r.do('BF.ADD', key, 'probe')
            r.do('BF.ADD', key, 'probe2')
            r.do('BF.EXISTS', key, 'probe')
            r.do('BF.DEBUG', key)
        r.do('DEL', key)
    def cfh(items=1, nb=4, dels=0, nf=1, bs=2, mi=20, exp=1):
        return struct.pack('<QQQQHHH', items, nb, dels, nf, bs, mi, exp)
    r.section = 'cf-headers'
    cases = [('exp32768', cfh(exp=32768)), ('exp32769', cfh(exp=32769)), ('exp3-nf2', cfh(exp=3, nf=2)),
             ('nf30-exp2', cfh(nf=30, exp=2)), ('nf40-exp2', cfh(nf=40, exp=2)),
             ('nb2^31-bs1', cfh(nb=1 << 31, bs=1)), ('nb2^33-bs1', cfh(nb=1 << 33, bs=1))]
    cases += [('nb2^%d' % e, cfh(nb=1 << e)) for e in (41, 44, 45, 50, 55)]
    for key, h in cases:
        r.do('CF.LOADCHUNK', key, 1, h)
        r.do('CF.INFO', key)
        if key.startswith('exp'):
            r.do('CF.SCANDUMP', key, 1)
            r.do('CF.SCANDUMP', key, 9)
        r.do('DEL', key)


def crc64(b):
    """Redis's crc64 (Jones polynomial, reflected, no final xor)."""
    poly, crc = 0x95ac9329ac4bc9b5, 0
    for c in b:
        crc ^= c
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
    return crc


def area_crafted(r):
    """Crafted dump headers (LOADCHUNK and RESTORE) followed by many adds and
    one MEXISTS of them all: every Cuckoo expansion from 0 to 32768 that
    matters, one-bucket headers with CF.INSERT of one item ten times, a DUMP
    of a CF with EXPANSION 4 patched to 3, and BF headers of odd fields. A
    key whose RedisBloom filter misses an add it acknowledged is marked
    `lossy` on every record after its load (bfserver's filter differs on
    purpose: the acks are compared, its MEXISTS must find every item)."""
    import math
    def cfh(items=0, nb=2, dels=0, nf=1, bs=1, mi=500, exp=3):
        return struct.pack('<QQQQHHH', items, nb, dels, nf, bs, mi, exp)

    def session(key, load, n, batch):
        """The commands after the load: adds (CF.ADD one by one, or
        CF.INSERT batches), MEXISTS of them all, CF.DEBUG."""
        items = ['item%d' % i for i in range(n)]
        cmds = []
        if batch == 1:
            cmds += [('CF.ADD', key, it) for it in items]
        else:
            cmds += [('CF.INSERT', key, 'ITEMS') + tuple(items[i:i + batch]) for i in range(0, n, batch)]
        cmds += [('CF.MEXISTS', key) + tuple(items), ('CF.DEBUG', key)]
        return cmds

    def misses(load, cmds):
        """Run the case unrecorded on a scratch key: how many acknowledged
        adds its MEXISTS misses."""
        r.silent('DEL', '__probe')
        if isinstance(r.silent(*[('__probe' if a == load[1] else a) for a in load]), RespError):
            return 0
        acked, lost = set(), 0
        for cmd in cmds:
            cmd = tuple('__probe' if a == load[1] else a for a in cmd)
            v = r.silent(*cmd)
            if cmd[0] == 'CF.ADD' and v == 1:
                acked.add(cmd[2])
            if cmd[0] == 'CF.INSERT' and isinstance(v, list):
                acked.update(it for it, x in zip(cmd[3:], v) if x == 1)
            if cmd[0] == 'CF.MEXISTS':
                lost = sum(1 for it, x in zip(cmd[2:], v) if it in acked and x != 1)
        r.silent('DEL', '__probe')
        return lost

    def case(load, cmds, note, exp):
        # A non-power-of-two expansion gives sub-filters whose kick-outs
        # RedisBloom gets wrong: bfserver's filter differs there even
        # where this run happened to lose nothing.
        lost = misses(load, cmds)
        odd = exp & (exp - 1) != 0
        r.do(*load, note=note)
        for cmd in cmds:
            n = None
            if cmd[0] == 'CF.MEXISTS' and (lost or odd):
                n = 'RedisBloom misses %d of the %d items it acknowledged' % (lost, len(cmd) - 2)
            r.do(*cmd, note=n, lossy=True if (lost or odd) else None)
        r.do('DEL', load[1])

    r.section = 'cf-crafted-loadchunk'
    case(('CF.LOADCHUNK', 'exp3', 1, cfh()), session('exp3', None, 2000, 1),
         'items 0, buckets 2, deletes 0, filters 1, bucket size 1, max iterations 500, expansion 3', 3)
    for exp in (2, 4):
        k = 'exp%d' % exp
        case(('CF.LOADCHUNK', k, 1, cfh(exp=exp)), session(k, None, 2000, 1), 'as exp3, expansion %d' % exp, exp)
    r.section = 'cf-crafted-sweep'
    for nb in (1, 2, 4):
        for bs in (1, 2, 3, 4):
            for exp in (0, 1, 2, 3, 5, 6, 7, 8, 12, 16, 17, 255, 1000, 32767, 32768):
                for mi in (1, 20):
                    k = 'nb%d-bs%d-exp%d-mi%d' % (nb, bs, exp, mi)
                    case(('CF.LOADCHUNK', k, 1, cfh(nb=nb, bs=bs, exp=exp, mi=mi)), session(k, None, 300, 100),
                         'buckets %d, bucket size %d, expansion %d, max iterations %d' % (nb, bs, exp, mi), exp)
    r.section = 'cf-one-bucket-insert'
    for bs in (1, 2, 4, 255):
        for exp in (0, 1, 2, 3):
            k = 'ob-bs%d-exp%d' % (bs, exp)
            case(('CF.LOADCHUNK', k, 1, cfh(nb=1, bs=bs, exp=exp, mi=20)),
                 [('CF.INSERT', k, 'ITEMS') + ('1',) * 10, ('CF.DEBUG', k), ('CF.MEXISTS', k, '1'), ('CF.COUNT', k, '1')],
                 'one bucket of %d, expansion %d: then CF.INSERT of 1 ten times' % (bs, exp), exp)
    r.section = 'cf-crafted-restore'
    r.do('CF.RESERVE', 'src', 2, 'BUCKETSIZE', 1, 'MAXITERATIONS', 500, 'EXPANSION', 4)
    dump = r.do('DUMP', 'src', volatile=True, note='the RDB version is the 8.0-m01 core\'s')
    body = dump[:-10]
    # CFRdbSave: nf, nb, items, deletes, bucket size, max iterations,
    # expansion, each a module uint (opcode 2, then a 1-byte length for
    # values below 64, two bytes 0x41 0xf4 for 500); expansion is the 7th.
    i = body.index(bytes([2, 1, 2, 2, 2, 0, 2, 0, 2, 1, 2, 0x41, 0xf4]))
    fields = i + 13
    assert body[fields:fields + 2] == bytes([2, 4]), body
    for exp in (3, 4, 5, 6, 8):
        b = bytearray(body)
        b[fields + 1] = exp
        b = bytes(b) + dump[-10:-8]
        payload = b + struct.pack('<Q', crc64(b))
        k = 'restored-exp%d' % exp
        case(('RESTORE', k, 0, payload), [('CF.DEBUG', k)] + session(k, None, 2000, 1),
             'DUMP of CF.RESERVE src 2 BUCKETSIZE 1 MAXITERATIONS 500 EXPANSION 4, expansion set to %d, CRC64 recomputed' % exp, exp)
    r.section = 'bf-crafted'
    def link(entries, err, bpe=None, hashes=None, bits=None, size=0, n2=0):
        bpe = -(math.log(err) / 0.480453013918201) if bpe is None else bpe
        if bits is None:
            bits = int(entries * bpe) or 1
            bits = (bits // 64 + (bits % 64 != 0)) * 64
        hashes = math.ceil(0.693147180559945 * bpe) if hashes is None else hashes
        return (bits // 8, bits, size, err, bpe, hashes, entries, n2)
    def bfh(links, opts=5, growth=2):
        h = struct.pack('<QIII', sum(l[2] for l in links), len(links), opts, growth)
        for l in links:
            h += struct.pack('<QQQddIQB', *l)
        return h
    cases = [
        ('g3', bfh([link(10, 0.01)], growth=3)), ('g0', bfh([link(10, 0.01)], growth=0)),
        ('g1', bfh([link(10, 0.01)], growth=1)), ('g1000', bfh([link(10, 0.01)], growth=1000)),
        ('opts0', bfh([link(10, 0.01)], opts=0)), ('opts1', bfh([link(10, 0.01)], opts=1)),
        ('opts13', bfh([link(10, 0.01)], opts=13)), ('opts15', bfh([link(10, 0.01)], opts=15)),
        ('err0.5', bfh([link(10, 0.5)])), ('err0.9', bfh([link(10, 0.9)])),
        ('err1e-9', bfh([link(10, 1e-9)])), ('bpe0-h0', bfh([link(10, 0.01, bpe=0.0, hashes=0, bits=64)])),
        ('bits64-e1000', bfh([link(1000, 0.01, bits=64)])), ('n2-6', bfh([link(10, 0.01, bits=128, n2=6)])),
        ('n2-7', bfh([link(10, 0.01, bits=128, n2=7)])), ('n2-8', bfh([link(10, 0.01, bits=128, n2=8)])),
        ('3links', bfh([link(5, 0.01, size=5), link(10, 0.005, size=10), link(20, 0.0025, size=3)])),
        ('3links-odd', bfh([link(5, 0.2, size=5), link(7, 0.3, size=7), link(3, 0.01, size=1)], growth=5)),
        ('e0', bfh([link(0, 0.01, bits=64)])), ('full', bfh([link(10, 0.01, size=10)], growth=7)),
    ]
    for key, h in cases:
        items = ['item%d' % i for i in range(300)]
        r.do('BF.LOADCHUNK', key, 1, h)
        r.do('BF.INSERT', key, 'NOCREATE', 'ITEMS', *items)
        r.do('BF.MEXISTS', key, *items)
        r.do('BF.DEBUG', key)
        r.do('DEL', key)


# ---------------------------------------------------------------------------
# Area 4: WATCH


def area_watch(r):

    def case(name, setup, watch, change, body=(('BF.ADD', 'k', 'fromexec'),), keys=('k',),
             a='a', b='b', exec_sleep=None):
        r.section = name
        r.do('FLUSHALL', conn=b, note='setup')
        for cmd in setup:
            r.do(*cmd, conn=b)
        r.do('WATCH', *keys, conn=a) if watch else None
        for cmd in change:
            if cmd and cmd[0] == '@a':
                r.do(*cmd[1:], conn=a)
            else:
                r.do(*cmd, conn=b)
        r.do('MULTI', conn=a)
        for cmd in body:
            r.do(*cmd, conn=a)
        r.do('EXEC', conn=a, sleep_ms=exec_sleep)

    for proto in (2, 3):
        a, b = 'a%d' % proto, 'b%d' % proto
        if proto == 3:
            r.hello3(a)
            r.hello3(b)
        bf = [('BF.ADD', 'k', 'x')]
        cf = [('CF.ADD', 'k', 'x')]
        P = lambda n: 'p%d-%s' % (proto, n)
        case(P('bf.add'), bf, True, [('BF.ADD', 'k', 'y')], a=a, b=b)
        case(P('bf.add-present'), bf, True, [('BF.ADD', 'k', 'x')], a=a, b=b)
        case(P('bf.madd-present'), bf, True, [('BF.MADD', 'k', 'x')], a=a, b=b)
        case(P('bf.insert-present'), bf, True, [('BF.INSERT', 'k', 'ITEMS', 'x')], a=a, b=b)
        case(P('bf.add-missing-key'), [], True, [('BF.ADD', 'k', 'y')], a=a, b=b)
        case(P('bf.add-wrongtype'), [('SET', 'k', 'v')], True, [('BF.ADD', 'k', 'y')], a=a, b=b)
        case(P('bf.add-full'), [('BF.RESERVE', 'k', '0.01', '1', 'NONSCALING'), ('BF.ADD', 'k', 'x')], True,
             [('BF.ADD', 'k', 'y')], body=(('PING',),), a=a, b=b)
        case(P('bf.reserve-new'), [], True, [('BF.RESERVE', 'k', '0.01', '100')], a=a, b=b)
        case(P('bf.reserve-exists'), bf, True, [('BF.RESERVE', 'k', '0.01', '100')], a=a, b=b)
        case(P('bf.reserve-badarg'), [], True, [('BF.RESERVE', 'k', '2', '100')], a=a, b=b)
        case(P('bf.loadchunk-bad'), bf, True, [('BF.LOADCHUNK', 'k', '1', 'garbage')], a=a, b=b)
        case(P('bf.exists'), bf, True, [('BF.EXISTS', 'k', 'x'), ('BF.MEXISTS', 'k', 'x', 'y'), ('BF.INFO', 'k'),
                                        ('BF.CARD', 'k'), ('BF.SCANDUMP', 'k', '0'), ('BF.DEBUG', 'k'),
                                        ('EXISTS', 'k'), ('TYPE', 'k'), ('TTL', 'k'), ('MEMORY', 'USAGE', 'k'),
                                        ('OBJECT', 'ENCODING', 'k'), ('DUMP', 'k')], a=a, b=b)
        case(P('cf.add'), cf, True, [('CF.ADD', 'k', 'x')], a=a, b=b)
        case(P('cf.addnx-present'), cf, True, [('CF.ADDNX', 'k', 'x')], a=a, b=b)
        case(P('cf.insertnx-present'), cf, True, [('CF.INSERTNX', 'k', 'ITEMS', 'x')], a=a, b=b)
        case(P('cf.del'), cf, True, [('CF.DEL', 'k', 'x')], a=a, b=b)
        case(P('cf.del-absent-item'), cf, True, [('CF.DEL', 'k', 'nope')], a=a, b=b)
        case(P('cf.del-missing-key'), [], True, [('CF.DEL', 'k', 'nope')], a=a, b=b)
        case(P('cf.compact'), cf, True, [('CF.COMPACT', 'k')], a=a, b=b)
        case(P('cf.reads'), cf, True, [('CF.EXISTS', 'k', 'x'), ('CF.MEXISTS', 'k', 'x'), ('CF.COUNT', 'k', 'x'),
                                       ('CF.INFO', 'k'), ('CF.SCANDUMP', 'k', '0'), ('CF.DEBUG', 'k')], a=a, b=b)
        case(P('cf.reserve-exists'), cf, True, [('CF.RESERVE', 'k', '100')], a=a, b=b)
        case(P('del'), bf, True, [('DEL', 'k')], a=a, b=b)
        case(P('del-missing'), [], True, [('DEL', 'k')], a=a, b=b)
        case(P('unlink'), bf, True, [('UNLINK', 'k')], a=a, b=b)
        case(P('expire'), bf, True, [('EXPIRE', 'k', '100')], a=a, b=b)
        case(P('expire-missing'), [], True, [('EXPIRE', 'k', '100')], a=a, b=b)
        case(P('expire-nx-refused'), bf + [('EXPIRE', 'k', '100')], True, [('EXPIRE', 'k', '50', 'NX')], a=a, b=b)
        case(P('persist'), bf + [('EXPIRE', 'k', '100')], True, [('PERSIST', 'k')], a=a, b=b)
        case(P('persist-noop'), bf, True, [('PERSIST', 'k')], a=a, b=b)
        case(P('rename-onto'), [('BF.ADD', 'src', 'x')], True, [('RENAME', 'src', 'k')], a=a, b=b)
        case(P('rename-away'), bf, True, [('RENAME', 'k', 'dst')], a=a, b=b)
        case(P('renamenx-refused'), bf + [('BF.ADD', 'src', 'x')], True, [('RENAMENX', 'src', 'k')], a=a, b=b)
        case(P('copy-onto'), [('SET', 'src', 'v')], True, [('COPY', 'src', 'k')], a=a, b=b)
        case(P('flushall'), bf, True, [('FLUSHALL',)], a=a, b=b)
        case(P('flushall-missing'), [], True, [('FLUSHALL',)], a=a, b=b)
        case(P('flushdb'), bf, True, [('FLUSHDB',)], a=a, b=b)
        case(P('flushdb-missing'), [], True, [('FLUSHDB',)], a=a, b=b)
        case(P('set'), [], True, [('SET', 'k', 'v')], a=a, b=b)
        case(P('set-nx-refused'), [('SET', 'k', 'v')], True, [('SET', 'k', 'w', 'NX')], a=a, b=b)
        r.section = P('restore-setup')
        r.do('BF.ADD', 'src', 'x', conn=b)
        payload = r.do('DUMP', 'src', conn=b, volatile=True, note='the payload of the RESTOREs below')
        case(P('restore'), [], True, [('RESTORE', 'k', '0', payload)], a=a, b=b)
        case(P('restore-busykey'), [('BF.ADD', 'k', 'x')], True, [('RESTORE', 'k', '0', payload)], a=a, b=b)
        case(P('other-key'), bf, True, [('BF.ADD', 'other', 'x')], a=a, b=b)
        case(P('no-change'), bf, True, [], a=a, b=b)
        case(P('own-change'), bf, True, [('@a', 'BF.ADD', 'k', 'own')], a=a, b=b)
        case(P('own-change-noop'), bf, True, [('@a', 'BF.ADD', 'k', 'x')], a=a, b=b)
        case(P('several-keys'), bf + [('BF.ADD', 'k2', 'x')], True, [('BF.ADD', 'k2', 'y')],
             keys=('k', 'k2', 'k3'), a=a, b=b)
        case(P('several-keys-missing-one'), bf, True, [('BF.ADD', 'k3', 'y')], keys=('k', 'k2', 'k3'), a=a, b=b)
        case(P('unwatch'), bf, True, [('@a', 'UNWATCH'), ('BF.ADD', 'k', 'y')], a=a, b=b)
        case(P('watch-twice'), bf, True, [('@a', 'WATCH', 'k'), ('BF.ADD', 'k', 'y')], a=a, b=b)
        case(P('expired-before-exec'), bf + [('PEXPIRE', 'k', '100')], True, [], a=a, b=b, exec_sleep=300)
        case(P('expire-in-past'), bf, True, [('PEXPIREAT', 'k', '1')], a=a, b=b)
        case(P('dbsize-keys'), bf, True, [('DBSIZE',), ('KEYS', '*'), ('SCAN', '0'), ('RANDOMKEY',)], a=a, b=b)
        case(P('empty-exec-body'), bf, True, [('BF.ADD', 'k', 'y')], body=(), a=a, b=b)
        # WATCH inside MULTI, EXEC after DISCARD, UNWATCH inside MULTI
        r.section = P('watch-inside-multi')
        r.do('FLUSHALL', conn=b, note='setup')
        r.do('MULTI', conn=a)
        r.do('WATCH', 'k', conn=a)
        r.do('BF.ADD', 'k', 'x', conn=a)
        r.do('EXEC', conn=a)
        r.section = P('unwatch-inside-multi')
        r.do('FLUSHALL', conn=b, note='setup')
        r.do('WATCH', 'k', conn=a)
        r.do('MULTI', conn=a)
        r.do('UNWATCH', conn=a)
        r.do('BF.ADD', 'k', 'x', conn=a)
        r.do('EXEC', conn=a)
        r.section = P('discard-unwatches')
        r.do('FLUSHALL', conn=b, note='setup')
        r.do('BF.ADD', 'k', 'x', conn=b)
        r.do('WATCH', 'k', conn=a)
        r.do('MULTI', conn=a)
        r.do('BF.ADD', 'k', 'q', conn=a)
        r.do('DISCARD', conn=a)
        r.do('EXEC', conn=a)
        r.do('BF.ADD', 'k', 'y', conn=b)
        r.do('MULTI', conn=a)
        r.do('BF.ADD', 'k', 'z', conn=a)
        r.do('EXEC', conn=a)
        r.section = P('exec-unwatches')
        r.do('FLUSHALL', conn=b, note='setup')
        r.do('WATCH', 'k', conn=a)
        r.do('MULTI', conn=a)
        r.do('EXEC', conn=a)
        r.do('BF.ADD', 'k', 'y', conn=b)
        r.do('MULTI', conn=a)
        r.do('BF.ADD', 'k', 'z', conn=a)
        r.do('EXEC', conn=a)
        r.section = P('aborted-exec-unwatches')
        r.do('FLUSHALL', conn=b, note='setup')
        r.do('WATCH', 'k', conn=a)
        r.do('BF.ADD', 'k', 'y', conn=b)
        r.do('MULTI', conn=a)
        r.do('EXEC', conn=a)
        r.do('BF.ADD', 'k', 'w', conn=b)
        r.do('MULTI', conn=a)
        r.do('BF.ADD', 'k', 'z', conn=a)
        r.do('EXEC', conn=a)
        r.section = P('execabort-with-dirty-watch')
        r.do('FLUSHALL', conn=b, note='setup')
        r.do('WATCH', 'k', conn=a)
        r.do('BF.ADD', 'k', 'y', conn=b)
        r.do('MULTI', conn=a)
        r.do('BF.ADD', 'k', conn=a)
        r.do('EXEC', conn=a)
        r.section = P('other-db-then-select')
        r.do('FLUSHALL', conn=b, note='setup')
        r.do('SELECT', '1', conn=a)
        r.do('BF.ADD', 'k', 'x', conn=a)
        r.do('WATCH', 'k', conn=a)
        r.do('SELECT', '0', conn=a)
        r.do('BF.ADD', 'k', 'y', conn=b, note='db 0: not the watched key')
        r.do('MULTI', conn=a)
        r.do('BF.ADD', 'k', 'z', conn=a)
        r.do('EXEC', conn=a)
        r.do('WATCH', 'k', conn=a, note='now in db 0')
        r.do('SELECT', '1', conn=a)
        r.do('SELECT', '1', conn=b)
        r.do('BF.ADD', 'k', 'y', conn=b, note='db 1: still not the watched key (db 0)')
        r.do('MULTI', conn=a)
        r.do('BF.ADD', 'k', 'z', conn=a)
        r.do('EXEC', conn=a)
        r.do('SELECT', '0', conn=a)
        r.do('WATCH', 'k', conn=a)
        r.do('SELECT', '1', conn=a)
        r.do('SELECT', '0', conn=b)
        r.do('BF.ADD', 'k', 'qq', conn=b, note='db 0: the watched key')
        r.do('MULTI', conn=a)
        r.do('BF.ADD', 'k', 'z', conn=a)
        r.do('EXEC', conn=a)
        r.do('SELECT', '0', conn=a)
        r.section = P('flushdb-other-db')
        r.do('FLUSHALL', conn=b, note='setup')
        r.do('BF.ADD', 'k', 'x', conn=b)
        r.do('WATCH', 'k', conn=a)
        r.do('SELECT', '1', conn=b)
        r.do('BF.ADD', 'k', 'x', conn=b)
        r.do('FLUSHDB', conn=b)
        r.do('SELECT', '0', conn=b)
        r.do('MULTI', conn=a)
        r.do('EXEC', conn=a)
        r.section = P('swapdb')
        r.do('FLUSHALL', conn=b, note='setup')
        r.do('BF.ADD', 'k', 'x', conn=b)
        r.do('WATCH', 'k', conn=a)
        r.do('SWAPDB', '0', '1', conn=b)
        r.do('MULTI', conn=a)
        r.do('EXEC', conn=a)
        r.do('SWAPDB', '0', '1', conn=b)
        r.section = P('errors')
        r.do('WATCH', conn=a)
        r.do('EXEC', conn=a)
        r.do('DISCARD', conn=a)
        r.do('MULTI', conn=a)
        r.do('MULTI', conn=a)
        r.do('EXEC', conn=a)
        r.do('UNWATCH', 'x', conn=a)
        r.do('UNWATCH', conn=a)
        r.section = P('reset-unwatches')
        r.do('FLUSHALL', conn=b, note='setup')
        r.do('BF.ADD', 'k', 'x', conn=b)
        r.do('WATCH', 'k', conn=a)
        r.do('RESET', conn=a)
        if proto == 3:
            r.hello3(a)
        r.do('BF.ADD', 'k', 'y', conn=b)
        r.do('MULTI', conn=a)
        r.do('EXEC', conn=a)


# ---------------------------------------------------------------------------
# Area 5: edge cases


def bfhdr_set(h, off, fmt, val):
    h = bytearray(h)
    struct.pack_into('<' + fmt, h, off, val)
    return bytes(h)


BF_FIELDS = [  # name, offset (link 0 at 20), struct format
    ('size', 0, 'Q'), ('nfilters', 8, 'I'), ('options', 12, 'I'), ('growth', 16, 'I'),
    ('l0.bytes', 20, 'Q'), ('l0.bits', 28, 'Q'), ('l0.size', 36, 'Q'), ('l0.error', 44, 'd'),
    ('l0.bpe', 52, 'd'), ('l0.hashes', 60, 'I'), ('l0.entries', 64, 'Q'), ('l0.n2', 72, 'B'),
]
CF_FIELDS = [
    ('numItems', 0, 'Q'), ('numBuckets', 8, 'Q'), ('numDeletes', 16, 'Q'), ('numFilters', 24, 'Q'),
    ('bucketSize', 32, 'H'), ('maxIterations', 34, 'H'), ('expansion', 36, 'H'),
]
HUGE = {'Q': [0, 1 << 32, 1 << 40, 1 << 56, (1 << 63), (1 << 64) - 1], 'I': [0, 1 << 16, (1 << 32) - 1],
        'H': [0, 1, 255, 256, 65535], 'B': [0, 31, 32, 63, 64, 255],
        'd': [0.0, 1.0, -0.01, 2.0, float('nan'), float('inf'), 1e-300]}


def area_edge(r):
    r.section = 'big-reserve'
    r.do('BF.RESERVE', 'bf', '0.000001', '300000000')
    r.do('BF.INFO', 'bf')
    r.do('BF.INFO', 'bf', 'SIZE')
    r.do('BF.DEBUG', 'bf')
    r.do('MEMORY', 'USAGE', 'bf')
    r.do('BF.SCANDUMP', 'bf', '0')
    r.do('BF.ADD', 'bf', 'x')
    r.do('BF.EXISTS', 'bf', 'x')
    r.do('BF.CARD', 'bf')
    r.do('DEL', 'bf')
    r.do('BF.RESERVE', 'bf', '0.000001', '1073741824', note='largest capacity at the smallest tested error')
    r.do('BF.INFO', 'bf', 'SIZE')
    r.do('MEMORY', 'USAGE', 'bf')
    r.do('DEL', 'bf')
    r.do('CF.RESERVE', 'cf', '1073741824', 'BUCKETSIZE', '1')
    r.do('CF.INFO', 'cf')
    r.do('MEMORY', 'USAGE', 'cf')
    r.do('DEL', 'cf')
    r.do('DEBUG', 'SLEEP', '0', note='DEBUG is disabled by default (enable-debug-command no)')

    # --- BF headers
    r.section = 'bf-header'
    r.do('FLUSHALL')
    r.do('BF.RESERVE', 'src', '0.01', '10')
    r.do('BF.ADD', 'src', 'x')
    hdr = r.do('BF.SCANDUMP', 'src', '0')[1]
    r.do('BF.RESERVE', 'src2', '0.01', '2', 'EXPANSION', '2')
    r.do('BF.MADD', 'src2', 'a', 'b', 'c', 'd', 'e')
    hdr2 = r.do('BF.SCANDUMP', 'src2', '0')[1]
    r.do('BF.SCANDUMP', 'src', '0', note='the valid header every mutation starts from')
    r.do('BF.SCANDUMP', 'src2', '0', note='a two-link header')
    n = [0]

    def tryload(h, note):
        n[0] += 1
        key = 'h%d' % n[0]
        v = r.do('BF.LOADCHUNK', key, '1', h, note=note)
        if v == b'OK':
            r.do('BF.INFO', key)
            r.do('BF.DEBUG', key)
            r.do('BF.ADD', key, 'probe')
            r.do('BF.EXISTS', key, 'x')
            r.do('MEMORY', 'USAGE', key)
            r.do('DEL', key)

    tryload(hdr, 'unchanged')
    for name, off, fmt in BF_FIELDS:
        for val in HUGE[fmt]:
            tryload(bfhdr_set(hdr, off, fmt, val), '%s=%r' % (name, val))
    # consistent huge claims: bytes and bits agree, size sums agree
    for nbytes in (1 << 20, 1 << 30, 1 << 33, 1 << 40, 1 << 61):
        h = bfhdr_set(hdr, 20, 'Q', nbytes)
        h = bfhdr_set(h, 28, 'Q', (nbytes * 8) & ((1 << 64) - 1))
        tryload(h, 'consistent l0.bytes=%d l0.bits=bytes*8' % nbytes)
    # several corruptions at once: which error wins (all are 'received bad data'?)
    tryload(bfhdr_set(bfhdr_set(hdr, 8, 'I', 0), 44, 'd', 2.0), 'nfilters=0 and error=2')
    tryload(bfhdr_set(bfhdr_set(hdr, 60, 'I', 0), 0, 'Q', 99), 'hashes=0 and size=99')
    tryload(hdr[:-1], 'one byte short')
    tryload(hdr + b'\x00', 'one byte long')
    tryload(b'', 'empty')
    tryload(hdr[:20], 'chain header only, nfilters=1')
    tryload(bfhdr_set(hdr[:20], 8, 'I', 0), 'chain header only, nfilters=0')
    tryload(bfhdr_set(hdr, 8, 'I', 2), 'nfilters=2 with one link')
    tryload(hdr2, 'two links, unchanged')
    tryload(bfhdr_set(hdr2, 8, 'I', 1), 'two links, nfilters=1')
    tryload(bfhdr_set(hdr2, 20 + 53 + 16, 'Q', 1 << 40), 'two links, l1.size huge')
    # order: key state vs header
    r.section = 'bf-header-order'
    r.do('SET', 'str', 'v')
    r.do('BF.LOADCHUNK', 'str', '1', hdr)
    r.do('BF.LOADCHUNK', 'str', '1', b'garbage')
    r.do('BF.LOADCHUNK', 'src', '1', hdr)
    r.do('BF.LOADCHUNK', 'src', '1', b'garbage')
    r.do('BF.LOADCHUNK', 'src', 'x', b'garbage')
    r.do('BF.LOADCHUNK', 'nokey', '17', b'garbage')
    r.do('BF.LOADCHUNK', 'nokey', '0', hdr)
    r.do('BF.LOADCHUNK', 'nokey', '-1', hdr)
    r.do('BF.LOADCHUNK', 'str', 'x', b'garbage')
    r.do('BF.LOADCHUNK', 'h0', '1', hdr)
    r.do('BF.LOADCHUNK', 'h0', '17', b'\xff' * 16)
    r.do('BF.LOADCHUNK', 'h0', '17', b'\xff' * 17, note='chunk longer than the link')
    r.do('BF.LOADCHUNK', 'h0', '100', b'\xff' * 16)
    r.do('BF.LOADCHUNK', 'h0', '1', b'\xff' * 16, note='iterator 1 on an existing key is a data chunk')
    r.do('BF.LOADCHUNK', 'h0', '16', b'', note='empty chunk')

    # --- CF headers
    r.section = 'cf-header'
    r.do('CF.RESERVE', 'csrc', '8', 'BUCKETSIZE', '2')
    r.do('CF.ADD', 'csrc', 'a')
    chdr = r.do('CF.SCANDUMP', 'csrc', '0')[1]
    r.do('CF.SCANDUMP', 'csrc', '0', note='the valid header every mutation starts from')
    m = [0]

    def cftry(h, note):
        m[0] += 1
        key = 'c%d' % m[0]
        v = r.do('CF.LOADCHUNK', key, '1', h, note=note)
        if v == b'OK':
            r.do('CF.INFO', key)
            r.do('CF.DEBUG', key)
            r.do('MEMORY', 'USAGE', key)
            r.do('CF.EXISTS', key, 'a')
            r.do('DEL', key)

    cftry(chdr, 'unchanged')
    for name, off, fmt in CF_FIELDS:
        for val in HUGE[fmt]:
            cftry(bfhdr_set(chdr, off, fmt, val), '%s=%r' % (name, val))
    for nb in (3, 6, 1 << 20, 1 << 30, 1 << 34, 1 << 40, 1 << 55, 1 << 56):
        cftry(bfhdr_set(chdr, 8, 'Q', nb), 'numBuckets=%d' % nb)
    for nf in (2, 32, 33, 65536, 65537, 1 << 32):
        cftry(bfhdr_set(chdr, 24, 'Q', nf), 'numFilters=%d' % nf)
    cftry(bfhdr_set(bfhdr_set(chdr, 36, 'H', 0), 24, 'Q', 2), 'expansion=0 with numFilters=2')
    cftry(bfhdr_set(bfhdr_set(chdr, 32, 'H', 0), 34, 'H', 0), 'bucketSize=0 and maxIterations=0')
    cftry(bfhdr_set(bfhdr_set(chdr, 8, 'Q', 3), 32, 'H', 0), 'numBuckets=3 and bucketSize=0')
    cftry(bfhdr_set(bfhdr_set(chdr, 8, 'Q', 1 << 40), 24, 'Q', 3), 'numBuckets=2^40 and numFilters=3')
    cftry(bfhdr_set(bfhdr_set(chdr, 8, 'Q', 1 << 33), 32, 'H', 255), 'numBuckets=2^33 and bucketSize=255')
    cftry(chdr[:-1], 'one byte short')
    cftry(chdr + b'\x00', 'one byte long')
    cftry(b'', 'empty')
    r.section = 'cf-header-order'
    r.do('CF.LOADCHUNK', 'str', '1', chdr)
    r.do('CF.LOADCHUNK', 'str', '1', b'garbage')
    r.do('CF.LOADCHUNK', 'csrc', '1', b'garbage')
    r.do('CF.LOADCHUNK', 'csrc', '1', chdr)
    r.do('CF.LOADCHUNK', 'nokey', '0', chdr)
    r.do('CF.LOADCHUNK', 'nokey', 'x', chdr)
    r.do('CF.LOADCHUNK', 'nokey', '-1', chdr)
    r.do('CF.LOADCHUNK', 'nokey', '9', b'xxxxxxxx')
    r.do('CF.LOADCHUNK', 'str', '9', b'xxxxxxxx')
    r.do('CF.LOADCHUNK', 'str', 'x', b'xxxxxxxx')
    r.do('CF.LOADCHUNK', 'c0', '1', chdr)
    r.do('CF.LOADCHUNK', 'c0', '9', b'\x01' * 8)
    r.do('CF.LOADCHUNK', 'c0', '9', b'\x01' * 9, note='chunk longer than the sub-filter')
    r.do('CF.LOADCHUNK', 'c0', '10', b'\x01' * 8)
    r.do('CF.LOADCHUNK', 'c0', '100', b'\x01' * 8)
    r.do('CF.LOADCHUNK', 'c0', '8', b'', note='empty chunk')
    r.do('CF.INFO', 'c0')

    # --- one-bucket CF filters
    r.section = 'cf-one-bucket'
    for args in (['CF.RESERVE', 'r1', '2', 'BUCKETSIZE', '2'], ['CF.RESERVE', 'r1', '4', 'BUCKETSIZE', '2'],
                 ['CF.RESERVE', 'r2', '2', 'BUCKETSIZE', '1'], ['CF.RESERVE', 'r3', '3', 'BUCKETSIZE', '1'],
                 ['CF.RESERVE', 'r4', '255', 'BUCKETSIZE', '255'], ['CF.RESERVE', 'r4', '510', 'BUCKETSIZE', '255']):
        r.do(*args)
    for k in ('r1', 'r2', 'r3', 'r4'):
        r.do('CF.INFO', k)
    # a real 2-bucket filter, its header changed to one bucket
    for bs, exp, label in ((2, 1, 'bs2-exp1'), (1, 1, 'bs1-exp1'), (4, 0, 'bs4-exp0'), (2, 2, 'bs2-exp2')):
        src = 'ob-src-' + label
        r.do('CF.RESERVE', src, str(2 * bs), 'BUCKETSIZE', str(bs), 'EXPANSION', str(exp))
        r.do('CF.ADD', src, 'a')
        d = r.do('CF.SCANDUMP', src, '0')
        h1 = bfhdr_set(d[1], 8, 'Q', 1)
        r.do('CF.SCANDUMP', src, '0')
        key = 'ob-' + label
        r.do('CF.LOADCHUNK', key, '1', h1, note='header of %s with numBuckets=1' % src)
        r.do('CF.INFO', key)
        r.do('CF.DEBUG', key)
        r.do('CF.SCANDUMP', key, '1')
        r.do('CF.LOADCHUNK', key, str(1 + bs), b'\x00' * bs, note='data for the one bucket')
        r.do('CF.LOADCHUNK', key, str(1 + 2 * bs), b'\x00' * (2 * bs), note='data for two buckets')
        r.do('CF.EXISTS', key, 'a')
        r.do('CF.COUNT', key, 'a')
        for item in ('a', 'b', 'c', 'd', 'e', 'a', 'f', 'g', 'h'):
            r.do('CF.ADD', key, item)
        r.do('CF.ADDNX', key, 'a')
        r.do('CF.ADDNX', key, 'zz')
        r.do('CF.INSERT', key, 'ITEMS', 'i1', 'i2', 'i3', 'a')
        r.do('CF.INSERTNX', key, 'ITEMS', 'a', 'n1', 'n2')
        r.do('CF.COUNT', key, 'a')
        r.do('CF.MEXISTS', key, 'a', 'b', 'c', 'i1', 'n1', 'never')
        r.do('CF.DEL', key, 'a')
        r.do('CF.COUNT', key, 'a')
        r.do('CF.INFO', key)
        r.do('CF.DEBUG', key)
        r.do('CF.COMPACT', key)
        r.do('CF.INFO', key)
        it = '0'
        for _ in range(40):
            v = r.do('CF.SCANDUMP', key, it)
            if not v or v[0] == 0:
                break
            it = str(v[0])
    # the same header into a fresh key, then CF.INSERT directly (auto-grow path)
    r.do('CF.RESERVE', 'ob2src', '4', 'BUCKETSIZE', '2')
    r.do('CF.ADD', 'ob2src', 'a')
    h1 = bfhdr_set(r.do('CF.SCANDUMP', 'ob2src', '0')[1], 8, 'Q', 1)
    r.do('CF.LOADCHUNK', 'ob2', '1', h1)
    r.do('CF.INSERT', 'ob2', 'ITEMS', *['x%d' % i for i in range(12)])
    r.do('CF.INFO', 'ob2')
    r.do('CF.DEBUG', 'ob2')
    r.do('CF.INSERTNX', 'ob2', 'ITEMS', *['x%d' % i for i in range(14)])
    r.do('CF.INFO', 'ob2')


# ---------------------------------------------------------------------------
# Area 6: admin commands (server launched with --enable-debug-command yes)

INFO_SECTIONS = ['', 'server', 'clients', 'memory', 'persistence', 'stats', 'replication', 'cpu',
                 'modules', 'errorstats', 'cluster', 'keyspace', 'commandstats', 'latencystats',
                 'keysizes', 'bf', 'default', 'all', 'everything', 'nosuch', 'SERVER', 'server clients',
                 'bf_info']


def info_fields(text):
    out = []
    for line in text.decode().split('\r\n'):
        if not line:
            continue
        if line.startswith('#'):
            out.append(line)
        else:
            out.append(line.split(':', 1)[0])
    return out


def clientlist_fields(text):
    line = text.decode().strip().split('\n')[0]
    return [kv.split('=', 1)[0] for kv in line.split(' ')]


def addr_of(r, conn):
    info = r.silent('CLIENT', 'INFO', conn=conn)
    d = dict(kv.split('=', 1) for kv in info.decode().strip().split(' '))
    return d


def area_admin(r):
    r.section = 'slowlog'
    r.do('CONFIG', 'GET', 'slowlog-log-slower-than')
    r.do('CONFIG', 'GET', 'slowlog-max-len')
    r.do('CONFIG', 'GET', 'slowlog-*', unordered=True)
    r.do('SLOWLOG', 'RESET')
    r.do('SLOWLOG', 'LEN')
    r.do('SLOWLOG', 'GET')
    r.do('CONFIG', 'SET', 'slowlog-log-slower-than', '0')
    r.do('BF.ADD', 'k', 'x')
    r.do('CLIENT', 'SETNAME', 'slowpoke')
    r.do('BF.MADD', 'k', *['i%d' % i for i in range(40)])
    r.do('BF.ADD', 'k', 'y' * 200)
    r.do('SLOWLOG', 'LEN', volatile=True, note='counts every command since the threshold was set')
    r.do('SLOWLOG', 'GET', volatile=True, note='entries: [id, unix time, microseconds, argv, client addr, client name]',
         volatile_positions=[0, 1, 2, 4])
    r.do('SLOWLOG', 'GET', '1', volatile=True, volatile_positions=[0, 1, 2, 4])
    r.do('SLOWLOG', 'GET', '0')
    r.do('SLOWLOG', 'GET', '-1', volatile=True, volatile_positions=[0, 1, 2, 4])
    r.do('SLOWLOG', 'GET', '-2')
    r.do('SLOWLOG', 'GET', 'abc')
    r.do('SLOWLOG', 'GET', '1', '2')
    r.do('SLOWLOG', 'RESET')
    r.do('SLOWLOG', 'LEN', note='SLOWLOG LEN itself is not logged before it runs; the RESET is gone')
    r.do('SLOWLOG', 'RESET', 'x')
    r.do('SLOWLOG', 'HELP')
    r.do('SLOWLOG', 'BOGUS')
    r.do('SLOWLOG')
    r.do('CONFIG', 'SET', 'slowlog-max-len', '2')
    r.do('PING')
    r.do('PING')
    r.do('PING')
    r.do('SLOWLOG', 'LEN')
    r.hello3('r3')
    r.do('SLOWLOG', 'GET', conn='r3', volatile=True, volatile_positions=[0, 1, 2, 4])
    r.do('CONFIG', 'SET', 'slowlog-log-slower-than', '10000')
    r.do('CONFIG', 'SET', 'slowlog-max-len', '128')
    r.do('SLOWLOG', 'RESET')
    r.do('CONFIG', 'SET', 'slowlog-log-slower-than', '-1')
    r.do('CONFIG', 'SET', 'slowlog-log-slower-than', '-2')
    r.do('CONFIG', 'SET', 'slowlog-log-slower-than', 'abc')
    r.do('CONFIG', 'GET', 'slowlog-log-slower-than')
    r.do('CONFIG', 'SET', 'slowlog-log-slower-than', '10000')

    r.section = 'latency'
    r.do('CONFIG', 'GET', 'latency-monitor-threshold')
    r.do('LATENCY', 'LATEST')
    r.do('LATENCY', 'HISTORY', 'command')
    r.do('LATENCY', 'DOCTOR', volatile=True)
    r.do('CONFIG', 'SET', 'latency-monitor-threshold', '50')
    r.do('DEBUG', 'SLEEP', '0.1')
    r.do('LATENCY', 'LATEST', volatile=True, note='[[event, unix time, latest ms, max ms]]', volatile_positions=[1, 2, 3])
    r.do('LATENCY', 'LATEST', conn='r3', volatile=True, volatile_positions=[1, 2, 3])
    r.do('LATENCY', 'HISTORY', 'command', volatile=True, note='[[unix time, ms]]')
    r.do('LATENCY', 'HISTORY', 'nosuch')
    r.do('LATENCY', 'HISTORY')
    r.do('LATENCY', 'GRAPH', 'command', volatile=True)
    r.do('LATENCY', 'GRAPH', 'nosuch')
    r.do('LATENCY', 'DOCTOR', volatile=True)
    r.do('LATENCY', 'DOCTOR', conn='r3', volatile=True)
    r.do('LATENCY', 'HISTOGRAM', 'bf.add', volatile=True)
    r.do('LATENCY', 'HISTOGRAM', 'nosuch')
    r.do('LATENCY', 'RESET', 'nosuch')
    r.do('LATENCY', 'RESET', 'command')
    r.do('LATENCY', 'RESET')
    r.do('LATENCY', 'LATEST')
    r.do('LATENCY', 'HELP')
    r.do('LATENCY', 'BOGUS')
    r.do('LATENCY')
    r.do('CONFIG', 'SET', 'latency-monitor-threshold', 'abc')
    r.do('CONFIG', 'SET', 'latency-monitor-threshold', '-1')
    r.do('CONFIG', 'SET', 'latency-monitor-threshold', '0')

    r.section = 'client'
    for cn in ('c1', 'c2', 'c3', 'c4'):
        r.c(cn)
    c1, c2, c3 = addr_of(r, 'c1'), addr_of(r, 'c2'), addr_of(r, 'c3')
    vcl = ['id', 'addr', 'laddr', 'fd', 'age', 'idle', 'qbuf', 'qbuf-free', 'argv-mem', 'obl', 'oll',
           'omem', 'tot-mem', 'events', 'io-thread', 'net-i', 'net-o', 'tot-net-in', 'tot-net-out',
           'tot-cmds', 'rbs', 'rbp', 'multi-mem', 'cmd']
    v = r.do('CLIENT', 'LIST', volatile=True, volatile_fields=vcl)
    r.do('CLIENT', 'LIST', conn='r3', volatile=True, volatile_fields=vcl)
    r.write({'fields': clientlist_fields(v), 'note': 'field names of a CLIENT LIST line, in order'})
    r.do('CLIENT', 'LIST', 'TYPE', 'normal', volatile=True)
    r.do('CLIENT', 'LIST', 'TYPE', 'pubsub')
    r.do('CLIENT', 'LIST', 'TYPE', 'master')
    r.do('CLIENT', 'LIST', 'TYPE', 'bogus')
    r.do('CLIENT', 'LIST', 'ID', c1['id'], c2['id'], volatile=True, subst={'3': 'id:c1', '4': 'id:c2'})
    r.do('CLIENT', 'LIST', 'ID', 'abc')
    r.do('CLIENT', 'LIST', 'ID', '999999')
    r.do('CLIENT', 'LIST', 'ID')
    r.do('CLIENT', 'LIST', 'BOGUS')
    r.do('CLIENT', 'INFO', volatile=True, volatile_fields=vcl)
    r.do('CLIENT', 'INFO', conn='r3', volatile=True, volatile_fields=vcl)
    r.do('CLIENT', 'INFO', 'x')
    r.do('CLIENT', 'NO-EVICT', 'on')
    r.do('CLIENT', 'NO-EVICT', 'OFF')
    r.do('CLIENT', 'NO-EVICT', 'maybe')
    r.do('CLIENT', 'NO-EVICT')
    r.do('CLIENT', 'NO-TOUCH', 'on')
    r.do('CLIENT', 'NO-TOUCH', 'off')
    r.do('CLIENT', 'NO-TOUCH', 'maybe')
    r.do('CLIENT', 'PAUSE', '100')
    r.do('CLIENT', 'UNPAUSE')
    r.do('CLIENT', 'PAUSE', '100', 'WRITE')
    r.do('CLIENT', 'UNPAUSE')
    r.do('CLIENT', 'PAUSE', '100', 'ALL')
    r.do('CLIENT', 'UNPAUSE')
    r.do('CLIENT', 'PAUSE', 'abc')
    r.do('CLIENT', 'PAUSE', '-1')
    r.do('CLIENT', 'PAUSE', '100', 'BOGUS')
    r.do('CLIENT', 'PAUSE')
    r.do('CLIENT', 'UNPAUSE', 'x')
    r.do('CLIENT', 'PAUSE', '300', 'WRITE')
    r.do('BF.EXISTS', 'k', 'x', conn='c4', note='reads run during CLIENT PAUSE WRITE')
    r.do('BF.ADD', 'k', 'paused', conn='c4', volatile=True, note='a write waits for the pause to end (~300 ms)')
    r.do('CLIENT', 'REPLY', 'OFF', conn='c4', noreply=True)
    r.do('PING', conn='c4', noreply=True)
    r.do('CLIENT', 'REPLY', 'ON', conn='c4')
    r.do('CLIENT', 'REPLY', 'SKIP', conn='c4', noreply=True)
    r.do('PING', 'skipped', conn='c4', noreply=True)
    r.do('PING', 'answered', conn='c4')
    r.do('CLIENT', 'REPLY', 'BOGUS', conn='c4')
    r.do('CLIENT', 'REPLY', conn='c4')
    r.do('CLIENT', 'HELP')
    r.do('CLIENT', 'BOGUS')
    r.do('CLIENT')
    r.do('CLIENT', 'SETNAME', 'has space')
    r.do('CLIENT', 'SETNAME', '')
    r.do('CLIENT', 'GETNAME')
    r.do('CLIENT', 'SETNAME', 'admin')
    r.do('CLIENT', 'GETNAME')
    r.do('CLIENT', 'ID', volatile=True)
    r.do('CLIENT', 'SETINFO', 'lib-name', 'capture')
    r.do('CLIENT', 'SETINFO', 'lib-ver', '1.0')
    r.do('CLIENT', 'SETINFO', 'lib-name', 'has space')
    r.do('CLIENT', 'SETINFO', 'bogus', 'x')
    r.do('CLIENT', 'GETREDIR')
    r.do('CLIENT', 'TRACKINGINFO', volatile=True)

    r.section = 'client-kill'
    r.do('CLIENT', 'KILL', '1.2.3.4:5')
    r.do('CLIENT', 'KILL', 'bogus')
    r.do('CLIENT', 'KILL', c1['addr'], subst={'2': 'addr:c1'}, note='old form')
    r.do('PING', conn='c1', expect_close=True)
    r.do('CLIENT', 'KILL', 'ID', c2['id'], subst={'3': 'id:c2'})
    r.do('PING', conn='c2', expect_close=True)
    r.do('CLIENT', 'KILL', 'ID', c2['id'], subst={'3': 'id:c2'}, note='already gone')
    r.do('CLIENT', 'KILL', 'ADDR', c3['addr'], subst={'3': 'addr:c3'})
    r.do('PING', conn='c3', expect_close=True)
    r.do('CLIENT', 'KILL', 'ADDR', '1.2.3.4:5')
    r.do('CLIENT', 'KILL', 'ID', 'abc')
    r.do('CLIENT', 'KILL', 'ID', '0')
    r.do('CLIENT', 'KILL', 'ID', '-5')
    r.do('CLIENT', 'KILL', 'ID')
    r.do('CLIENT', 'KILL', 'BOGUS', 'x')
    r.do('CLIENT', 'KILL', 'TYPE', 'bogus')
    r.do('CLIENT', 'KILL', 'TYPE', 'pubsub')
    r.do('CLIENT', 'KILL', 'SKIPME', 'maybe')
    r.do('CLIENT', 'KILL', 'USER', 'nosuch')
    r.do('ACL', 'SETUSER', 'killme', 'on', 'nopass', '+@all')
    r.do('AUTH', 'killme', 'x', conn='k1')
    r.do('AUTH', 'killme', 'x', conn='k2')
    r.do('CLIENT', 'KILL', 'USER', 'killme')
    r.do('PING', conn='k1', expect_close=True)
    r.do('PING', conn='k2', expect_close=True)
    me = addr_of(r, 'main')
    r.c('l1')
    r.do('CLIENT', 'KILL', 'LADDR', me['laddr'], 'SKIPME', 'yes', volatile=True, subst={'3': 'laddr:main'},
         note='kills every other client on the listening address (r3, c4, l1, ...)')
    r.do('PING', conn='l1', expect_close=True)
    r.do('CLIENT', 'KILL', 'ID', me['id'], 'SKIPME', 'yes', subst={'3': 'id:main'})
    r.do('CLIENT', 'KILL', 'ID', me['id'], 'SKIPME', 'no', subst={'3': 'id:main'},
         note='the reply still arrives, then the connection closes')
    r.do('PING', expect_close=True, note='the connection killed itself')
    r.do('PING', note='a new connection')
    r.do('CLIENT', 'KILL', 'MAXAGE', '100000')
    for cn in list(r.conns):
        if cn != 'main':
            r.drop(cn)

    r.section = 'config'
    for v in ('100mb', '1gb', '0', '1GB', '100MB', '1024', '1k', '1kb', '-1', 'abc', '1xb', '100mbb', '',
              '9223372036854775807', '99999999999999999999', '1.5gb', '0x10'):
        r.do('CONFIG', 'SET', 'maxmemory', v)
        r.do('CONFIG', 'GET', 'maxmemory')
    r.do('CONFIG', 'SET', 'maxmemory', '0')
    r.hello3('r3')
    r.do('CONFIG', 'GET', 'maxmemory', conn='r3')
    r.do('CONFIG', 'GET', 'maxmemory-policy')
    for v in ('allkeys-lru', 'volatile-lfu', 'noeviction', 'bogus', 'NOEVICTION'):
        r.do('CONFIG', 'SET', 'maxmemory-policy', v)
        r.do('CONFIG', 'GET', 'maxmemory-policy')
    r.do('CONFIG', 'GET', 'latency-monitor-threshold')
    r.do('CONFIG', 'GET', 'latency-monitor-threshold', conn='r3')
    r.do('CONFIG', 'GET', 'slowlog-log-slower-than', 'slowlog-max-len', unordered=True)
    r.do('CONFIG', 'GET', 'maxmemory*', unordered=True)
    r.do('CONFIG', 'GET', 'bf-*', unordered=True)
    r.do('CONFIG', 'GET', 'cf-*', conn='r3', unordered=True)
    r.do('CONFIG', 'GET', 'save')
    r.do('CONFIG', 'GET', 'appendonly')
    r.do('CONFIG', 'GET', 'nosuch')
    r.do('CONFIG', 'GET', 'nosuch', conn='r3')
    r.do('CONFIG', 'GET', 'MAXMEMORY')
    r.do('CONFIG', 'SET', 'nosuch', '1')
    r.do('CONFIG', 'SET', 'maxmemory', '1mb', 'maxmemory', '2mb')
    r.do('CONFIG', 'SET', 'maxmemory', '1mb', 'slowlog-max-len', '64')
    r.do('CONFIG', 'GET', 'maxmemory')
    r.do('CONFIG', 'SET', 'maxmemory', '0', 'slowlog-max-len', 'abc')
    r.do('CONFIG', 'GET', 'maxmemory', note='an error in a multi-set rolls back the whole set')
    r.do('CONFIG', 'SET', 'maxmemory', '0')
    r.do('CONFIG', 'SET', 'maxmemory')
    r.do('CONFIG', 'SET', 'maxmemory', '0', 'x')
    r.do('CONFIG', 'GET')
    r.do('CONFIG', 'RESETSTAT')
    r.do('CONFIG', 'RESETSTAT', 'x')
    r.do('CONFIG', 'REWRITE')
    r.do('CONFIG', 'REWRITE', 'x')
    r.do('CONFIG', 'HELP')
    r.do('CONFIG', 'BOGUS')
    r.do('CONFIG')

    r.section = 'persistence'
    r.do('BF.ADD', 'keep', 'x')
    r.do('CF.ADD', 'keepc', 'x')
    r.do('SAVE')
    r.do('SAVE', 'x')
    r.do('LASTSAVE', volatile=True)
    r.do('LASTSAVE', 'x')
    r.do('BGSAVE', volatile=True, note='+Background saving started')
    for _ in range(100):
        if b'rdb_bgsave_in_progress:0' in r.silent('INFO', 'persistence'):
            break
        time.sleep(0.05)
    r.do('BGSAVE', 'SCHEDULE', volatile=True)
    for _ in range(100):
        if b'rdb_bgsave_in_progress:0' in r.silent('INFO', 'persistence'):
            break
        time.sleep(0.05)
    r.do('BGSAVE', 'BOGUS')
    r.do('BGSAVE', 'a', 'b')
    r.do('BGREWRITEAOF', volatile=True)
    for _ in range(100):
        if b'aof_rewrite_in_progress:0' in r.silent('INFO', 'persistence'):
            break
        time.sleep(0.05)

    r.section = 'debug'
    r.do('DEBUG', 'SLEEP', '0')
    r.do('DEBUG', 'SLEEP', 'abc')
    r.do('DEBUG', 'SLEEP')
    r.do('DEBUG', 'RELOAD')
    r.do('BF.EXISTS', 'keep', 'x')
    r.do('CF.EXISTS', 'keepc', 'x')
    r.do('DEBUG', 'RELOAD', 'NOSAVE')
    r.do('DEBUG', 'RELOAD', 'BOGUS')
    r.do('DEBUG', 'OBJECT', 'keep', volatile=True)
    r.do('DEBUG', 'OBJECT', 'nosuch')
    r.do('DEBUG', 'JMAP', volatile=True) if False else None
    r.do('DEBUG', 'HELP', volatile=True, note='long and core-version dependent')
    r.do('DEBUG', 'BOGUS')
    r.do('DEBUG')

    r.section = 'shutdown'
    r.do('SHUTDOWN', 'ABORT')
    r.do('SHUTDOWN', 'BOGUS')
    r.do('SHUTDOWN', 'NOSAVE', 'SAVE')
    r.do('SHUTDOWN', 'ABORT', 'NOW')
    r.do('SHUTDOWN', 'ABORT', 'x')

    r.section = 'monitor'
    r.do('MONITOR', conn='mon')
    r.do('PING', 'seen-by-monitor')
    r.recv('mon', note='+<unix time> [<db> <addr>] "PING" "seen-by-monitor"')
    r.do('PING', conn='mon', note='a MONITOR connection still runs commands? (it replies)', volatile=True)
    r.drop('mon')
    r.do('MONITOR', conn='mon3pre')
    r.drop('mon3pre')
    r.hello3('mon3')
    r.do('MONITOR', conn='mon3')
    r.drop('mon3')
    r.do('MULTI')
    r.do('MONITOR')
    r.do('DISCARD')

    r.section = 'info'
    for sec in INFO_SECTIONS:
        args = ['INFO'] + (sec.split(' ') if sec else [])
        v = r.do(*args, volatile=True)
        if isinstance(v, bytes) and not isinstance(v, RespError):
            r.write({'info': sec, 'fields': info_fields(v), 'note': 'section headers and field names, in order'})
    r.do('INFO', 'server', conn='r3', volatile=True)
    r.do('INFO', 'nosuch', conn='r3')

    r.section = 'unknown-in-redis'
    for args in UNKNOWN:
        r.do(*args, volatile=args[0] in ('SUBSCRIBE', 'PSUBSCRIBE', 'XADD'))
        if args[0] in ('SUBSCRIBE', 'PSUBSCRIBE', 'SSUBSCRIBE'):
            r.drop('main')
            r.c('main')

    r.section = 'shutdown-last'
    r.do('SHUTDOWN', 'NOSAVE', expect_close=True, note='no reply: the server exits')


UNKNOWN = [
    ['LPUSH', 'l', 'a', 'b'], ['RPUSH', 'l', 'c'], ['LRANGE', 'l', '0', '-1'], ['HSET', 'h', 'f', 'v'],
    ['HGET', 'h', 'f'], ['SADD', 's', 'm'], ['ZADD', 'z', '1', 'm'], ['INCR', 'n'], ['APPEND', 'a', 'x'],
    ['XADD', 'x', '*', 'f', 'v'], ['EVAL', 'return 1', '0'], ['EVALSHA', 'abc', '0'], ['FUNCTION', 'LIST'],
    ['PUBLISH', 'ch', 'm'], ['PFADD', 'p', 'a'], ['GEOADD', 'g', '0', '0', 'm'], ['SETBIT', 'b', '1', '1'],
    ['BLPOP', 'l2', '0.01'], ['OBJECT', 'FREQ', 'l'], ['CLUSTER', 'INFO'], ['SUBSCRIBE', 'ch'],
]


def area_unknown(r):
    """On a server launched with every command of UNKNOWN renamed away."""
    r.section = 'unknown-renamed'
    for args in UNKNOWN:
        r.do(*args)
    r.do('LPUSH')
    r.do('lpush', 'a' * 200, 'b', 'c', 'd', 'e')
    r.do('HSET', 'has space', "it's", 'new\nline')
    r.hello3('r3')
    r.do('LPUSH', 'l', 'a', conn='r3')
    r.do('MULTI')
    r.do('LPUSH', 'l', 'a')
    r.do('EXEC')


AREAS = {
    'commanddocs': (area_commanddocs, []),
    'acl': (area_acl, []),
    'memusage': (area_memusage, []),
    'watch': (area_watch, []),
    'edge': (area_edge, []),
    'memkeys': (area_memkeys, []),
    'headers': (area_headers, []),
    'crafted': (area_crafted, []),
    'admin': (area_admin, ['--enable-debug-command', 'yes']),
}
RENAMED = []
for _a in UNKNOWN:
    if _a[0] not in RENAMED:
        RENAMED.append(_a[0])


def launch(script, port, extra):
    out = subprocess.run([script, str(port)] + extra, check=True, capture_output=True, text=True)
    pid = int(out.stdout.strip().split()[-1])
    for _ in range(200):
        try:
            c = Conn(port)
            c.call('PING')
            c.close()
            return pid
        except OSError:
            time.sleep(0.05)
    raise SystemExit('server on %d did not start' % port)


def stop(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, required=True)
    ap.add_argument('--launch', help='start-redisbloom script: a fresh server per area')
    ap.add_argument('--out', default=HERE)
    ap.add_argument('areas', nargs='*')
    o = ap.parse_args()
    areas = o.areas or list(AREAS)
    for name in areas:
        fn, extra = AREAS[name]
        pid = launch(o.launch, o.port, extra) if o.launch else None
        try:
            r = Recorder(o.port, os.path.join(o.out, name + '.jsonl'))
            if not o.launch:
                r.silent('FLUSHALL')
            fn(r)
            if name == 'admin' and o.launch:
                # unknown-command replies: a second server with those commands renamed away
                r.close()
                stop(pid)
                time.sleep(0.2)
                ren = []
                for c in RENAMED:
                    ren += ['--rename-command', c, '']
                pid = launch(o.launch, o.port, ren)
                r2 = Recorder(o.port, os.path.join(o.out, name + '.jsonl.tmp'))
                area_unknown(r2)
                r2.close()
                with open(os.path.join(o.out, name + '.jsonl'), 'a') as f, \
                        open(os.path.join(o.out, name + '.jsonl.tmp')) as g:
                    f.write(g.read())
                os.remove(os.path.join(o.out, name + '.jsonl.tmp'))
                r.count += r2.count
            else:
                r.close()
            print('%s: %d records' % (name, r.count), file=sys.stderr)
        finally:
            if pid:
                stop(pid)
                time.sleep(0.2)


if __name__ == '__main__':
    main()
