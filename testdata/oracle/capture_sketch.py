#!/usr/bin/env python3
"""Capture RedisBloom 8.8.0's Count-Min Sketch (CMS.*), Top-K (TOPK.*) and
t-digest (TDIGEST.*, beside sketch/tdigest/testdata's own captures) replies.

Standard library only; reuses capture.py's client and Recorder. Each area runs
on a fresh server (--launch starts one per area on --port and kills it by PID).

    python3 capture_sketch.py --launch /work/shared/anchors/start-redisbloom \
        --port 7520 --out . [area ...]

Areas: cms, topk, tdigest (hand-written transcripts, RESP2 then RESP3),
topk-refused (payloads RedisBloom refuses, alone), cms-random and
topk-random (seeded random sessions), sketchdocs (COMMAND DOCS/INFO/GETKEYS and ACL CAT of the
sketch commands). Output: <area>.jsonl, or cms-random-NNN.jsonl per session.
"""
import argparse
import os
import random
import struct
import sys
import time

import capture as cap

HERE = cap.HERE


def crc64_payload(body):
    """A DUMP payload of body: RDB version 12 and the CRC64."""
    b = body + struct.pack('<H', 12)
    return b + struct.pack('<Q', cap.crc64(b))


def rdb_len(n):
    if n < 1 << 6:
        return bytes([n])
    if n < 1 << 14:
        return bytes([(n >> 8) | 0x40, n & 0xff])
    if n <= 0xffffffff:
        return b'\x80' + struct.pack('>I', n)
    return b'\x81' + struct.pack('>Q', n)


def module_id(name, encver):
    cs = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
    i = 0
    for ch in name:
        i = (i << 6) | cs.index(ch)
    return (i << 10) | encver


def cms_payload(w, d, count, cells=None, encver=0, cells_len=None):
    """A hand-made CMSk-TYPE DUMP payload (uncompressed counters)."""
    if cells is None:
        cells = b'\0' * (4 * w * d)
    n = len(cells) if cells_len is None else cells_len
    body = b'\x07' + rdb_len(module_id('CMSk-TYPE', encver))
    body += b'\x02' + rdb_len(w) + b'\x02' + rdb_len(d) + b'\x02' + rdb_len(count)
    body += b'\x05' + rdb_len(n) + cells + b'\x00'
    return crc64_payload(body)


def murmur2(key, seed):
    """The 32-bit MurmurHash2 RedisBloom hashes Top-K and CMS rows with."""
    if isinstance(key, str):
        key = key.encode()
    m, M = 0x5bd1e995, 0xffffffff
    h = (seed ^ len(key)) & M
    i, n = 0, len(key)
    while n - i >= 4:
        k = key[i] | key[i + 1] << 8 | key[i + 2] << 16 | key[i + 3] << 24
        k = (k * m) & M
        k ^= k >> 24
        k = (k * m) & M
        h = ((h * m) & M) ^ k
        i += 4
    rem = n - i
    if rem == 3:
        h ^= key[i + 2] << 16
    if rem >= 2:
        h ^= key[i + 1] << 8
    if rem >= 1:
        h ^= key[i]
        h = (h * m) & M
    h ^= h >> 13
    h = (h * m) & M
    h ^= h >> 15
    return h


def disjoint(names, width, depth, want):
    """Items of names no two of which share a Top-K bucket: RedisBloom's
    decay coin (rand()) is never drawn for them, so replies do not depend on
    the server's random seed."""
    used, out = set(), []
    for n in names:
        cells = {(i, murmur2(n, i) % width) for i in range(depth)}
        if used & cells or len(cells) < depth:
            continue
        used |= cells
        out.append(n)
        if len(out) == want:
            break
    return out


def topk_payload(k, w, d, decay, buckets=None, heap=None, items=None, encver=0):
    """A hand-made TopK-TYPE DUMP payload (uncompressed strings)."""
    body = b'\x07' + rdb_len(module_id('TopK-TYPE', encver))
    body += b'\x02' + rdb_len(k) + b'\x02' + rdb_len(w) + b'\x02' + rdb_len(d) + b'\x04' + struct.pack('<d', decay)
    if buckets is None:
        buckets = b'\0' * (8 * w * d)
    if heap is None:
        heap = b'\0' * (24 * k)
    body += b'\x05' + rdb_len(len(buckets)) + buckets
    body += b'\x05' + rdb_len(len(heap)) + heap
    for it in [b'\0'] * k if items is None else items:
        body += b'\x05' + rdb_len(len(it)) + it
    return crc64_payload(body + b'\x00')


def both(r, cases):
    """Run the same cases in RESP2 (conn p2) and RESP3 (conn p3)."""
    for proto in (2, 3):
        conn = 'p%d' % proto
        if proto == 3:
            r.hello3(conn)
        r.do('FLUSHALL', conn=conn)
        cases(r, conn)


def cms_cases(r, conn):
    def do(*a, **kw):
        return r.do(*a, conn=conn, **kw)
    r.section = 'cms.initbydim'
    do('SET', 'str', 'v')
    do('CMS.INITBYDIM')
    do('CMS.INITBYDIM', 'c')
    do('CMS.INITBYDIM', 'c', '10')
    do('CMS.INITBYDIM', 'c', '10', '3', '4')
    for w, d in (('x', '3'), ('0', '3'), ('-1', '3'), ('10', '0'), ('10', 'x'), ('10', '-5'),
                 ('x', 'x'), ('1.5', '3'), ('10', '3.0'), ('+10', '3'), (' 10', '3'), ('10 ', '3'),
                 ('', '3'), ('10', ''), ('9223372036854775808', '1'), ('1', '9223372036854775808'),
                 ('4611686018427387904', '2'), ('4611686018427387904', '3'), ('3074457345618258603', '3'),
                 ('9223372036854775807', '1'), ('1', '9223372036854775807'), ('4611686018427387903', '2'),
                 ('2305843009213693951', '1'), ('2305843009213693952', '2')):
        do('CMS.INITBYDIM', 'bad', w, d)
        do('DEL', 'bad')
    do('CMS.INITBYDIM', 'str', '10', '3')
    do('CMS.INITBYDIM', 'str', 'x', 'y')
    do('CMS.INITBYDIM', 'c', '10', '3')
    do('CMS.INITBYDIM', 'c', '10', '3')
    do('CMS.INITBYDIM', 'c', 'x', '0')
    do('cms.initbydim', 'c1', '1', '1')
    do('Cms.InitByDim', 'c2', '2000', '7')
    do('CMS.INITBYDIM', '', '5', '5')
    do('CMS.INITBYDIM', 'big', '100000', '10')
    do('CMS.INFO', 'c')
    do('CMS.INFO', 'c1')
    do('CMS.INFO', 'c2')
    do('CMS.INFO', '')
    do('CMS.INFO', 'big')
    r.section = 'cms.initbyprob'
    do('CMS.INITBYPROB')
    do('CMS.INITBYPROB', 'p', '0.1')
    do('CMS.INITBYPROB', 'p', '0.1', '0.1', 'x')
    for e, p in (('0', '0.1'), ('1', '0.1'), ('-0.1', '0.1'), ('x', '0.1'), ('1.5', '0.1'), ('inf', '0.1'),
                 ('nan', '0.1'), ('0.1', '0'), ('0.1', '1'), ('0.1', 'x'), ('0.1', '-1'), ('0.1', 'nan'),
                 ('x', 'x'), ('0.1', '1e-50'), ('0.1', '1e-45'), ('0.1', '1e-40'), ('1e-300', '0.5'),
                 ('1e-18', '0.5'), ('1e-19', '0.5'), ('2.168404344971009e-19', '0.5'),
                 ('2.1684043449710089e-19', '0.5'), ('1e-15', '0.5'), ('', '0.1'), ('0.1', ''),
                 ('0.1 ', '0.1'), ('0x0.1p0', '0.5'), ('1e-20', '1e-40')):
        do('CMS.INITBYPROB', 'bad', e, p)
        do('DEL', 'bad')
    do('CMS.INITBYPROB', 'str', '0.1', '0.1')
    do('CMS.INITBYPROB', 'c', 'x', 'x')
    i = 0
    for e, p in (('0.1', '0.1'), ('0.01', '0.01'), ('0.001', '0.01'), ('0.5', '0.5'), ('0.999999', '0.999999'),
                 ('0.3', '0.25'), ('0.3', '0.125'), ('0.3', '0.0625'), ('0.7', '0.49999997'),
                 ('0.7', '0.4999999'), ('0.7', '0.50000001'), ('0.2', '0.03125'), ('0.2', '0.031249999'),
                 ('0.2', '0.0312500001'), ('0.01', '1e-10'), ('0.01', '1e-38'), ('0.01', '1e-40'),
                 ('0.01', '1.401298464324817e-45'), ('0.01', '2.8e-45'), ('0.6666666666666666', '0.5'),
                 ('0.6666666666666667', '0.5'), ('0.4', '0.5'), ('0.0002', '0.002'), ('1e-5', '0.9'),
                 ('.5', '.5'), ('5e-1', '5E-1'), ('0.1', '0.000001')):
        do('CMS.INITBYPROB', 'p%d' % i, e, p)
        do('CMS.INFO', 'p%d' % i)
        i += 1
    r.section = 'cms.incrby'
    do('CMS.INCRBY')
    do('CMS.INCRBY', 'c')
    do('CMS.INCRBY', 'c', 'a')
    do('CMS.INCRBY', 'c', 'a', '1', 'b')
    do('CMS.INCRBY', 'nokey', 'a', '1')
    do('CMS.INCRBY', 'nokey', 'a', 'x')
    do('CMS.INCRBY', 'str', 'a', '1')
    do('CMS.INCRBY', 'str', 'a', 'x')
    do('CMS.INCRBY', 'c', 'a', '1')
    do('CMS.INCRBY', 'c', 'a', '1', 'b', '2', 'c', '3')
    do('CMS.INCRBY', 'c', 'a', 'x')
    do('CMS.INCRBY', 'c', 'a', '-1')
    do('CMS.INCRBY', 'c', 'a', '1', 'b', 'x')
    do('CMS.INCRBY', 'c', 'a', '1', 'b', '-1', 'c', 'x')
    do('CMS.INCRBY', 'c', 'a', 'x', 'b', '-1')
    do('CMS.INCRBY', 'c', 'a', '1.5')
    do('CMS.INCRBY', 'c', 'a', '+1')
    do('CMS.INCRBY', 'c', 'a', '')
    do('CMS.INCRBY', 'c', 'a', '9223372036854775808')
    do('CMS.INCRBY', 'c', 'a', '-0')
    do('CMS.INCRBY', 'c', 'a', '0')
    do('CMS.INCRBY', 'c', 'zero', '0')
    do('CMS.QUERY', 'c', 'a', 'b', 'c', 'zero', 'nothere')
    do('CMS.INFO', 'c')
    do('CMS.INCRBY', 'c', '', '5', 'a', '10')
    do('CMS.INCRBY', 'c', 'a', '4294967290')
    do('CMS.INCRBY', 'c', 'a', '10')
    do('CMS.INCRBY', 'c', 'a', '0')
    do('CMS.QUERY', 'c', 'a', 'b', '')
    do('CMS.INCRBY', 'c1', 'x', '4294967295')
    do('CMS.INCRBY', 'c1', 'y', '0')
    do('CMS.INCRBY', 'c1', 'x', '4294967296', 'y', '1')
    do('CMS.INCRBY', 'c1', 'z', '9223372036854775807')
    do('CMS.INFO', 'c1')
    do('CMS.INCRBY', 'c1', 'z', '9223372036854775807')
    do('CMS.INFO', 'c1')
    do('CMS.INCRBY', 'c1', 'z', '2')
    do('CMS.INFO', 'c1')
    do('CMS.QUERY', 'c1', 'x', 'anything')
    items = ['item%d' % i for i in range(60)]
    args = []
    for n, it in enumerate(items):
        args += [it, str(n * 7 + 1)]
    do('CMS.INCRBY', 'c2', *args)
    do('CMS.QUERY', 'c2', *items)
    do('CMS.INCRBY', 'c', *args)
    do('CMS.QUERY', 'c', *items)
    do('CMS.INCRBY', 'c2', 'bin\x00ary\xff', '3')
    r.section = 'cms.query'
    do('CMS.QUERY')
    do('CMS.QUERY', 'c')
    do('CMS.QUERY', 'nokey', 'a')
    do('CMS.QUERY', 'str', 'a')
    do('CMS.QUERY', 'c2', 'bin\x00ary\xff', 'bin')
    do('CMS.QUERY', 'c', 'a', 'a', 'a')
    r.section = 'cms.info'
    do('CMS.INFO')
    do('CMS.INFO', 'c', 'x')
    do('CMS.INFO', 'nokey')
    do('CMS.INFO', 'str')
    do('cms.info', 'c')
    r.section = 'cms.merge'
    do('CMS.INITBYDIM', 'm1', '10', '3')
    do('CMS.INITBYDIM', 'm2', '10', '3')
    do('CMS.INITBYDIM', 'm3', '10', '3')
    do('CMS.INITBYDIM', 'w11', '11', '3')
    do('CMS.INITBYDIM', 'd4', '10', '4')
    do('CMS.INCRBY', 'm1', 'x', '5', 'y', '7', 'big', '4000000000')
    do('CMS.INCRBY', 'm2', 'x', '2', 'z', '1')
    do('CMS.MERGE')
    do('CMS.MERGE', 'm3')
    do('CMS.MERGE', 'm3', '1')
    do('CMS.MERGE', 'm3', '2', 'm1', 'm2')
    do('CMS.QUERY', 'm3', 'x', 'y', 'z', 'big')
    do('CMS.INFO', 'm3')
    for ws in (('1', '1'), ('2', '-3'), ('0', '0'), ('1', '0'), ('-1', '1'), ('1000000000', '3'),
               ('9223372036854775807', '3'), ('-9223372036854775808', '0'), ('2', '-2'), ('1', '-2'),
               ('0', '5'), ('x', '1'), ('1', 'x'), ('1.0', '1'), ('', '1'), ('9223372036854775808', '1')):
        do('CMS.MERGE', 'm3', '2', 'm1', 'm2', 'WEIGHTS', *ws)
        do('CMS.QUERY', 'm3', 'x', 'y', 'z', 'big')
        do('CMS.INFO', 'm3')
    do('CMS.MERGE', 'm3', '1', 'm3')
    do('CMS.MERGE', 'm3', '1', 'm3', 'WEIGHTS', '2')
    do('CMS.QUERY', 'm3', 'x', 'y', 'z')
    do('CMS.MERGE', 'm3', '3', 'm3', 'm1', 'm3', 'WEIGHTS', '1', '1', '-1')
    do('CMS.INFO', 'm3')
    do('CMS.MERGE', 'nokey', '1', 'm1')
    do('CMS.MERGE', 'str', '1', 'm1')
    do('CMS.MERGE', 'nokey', 'x', 'm1')
    do('CMS.MERGE', 'str', 'x', 'x')
    for a in (['x', 'm1'], ['0', 'm1'], ['-1', 'm1'], ['2', 'm1'], ['1', 'm1', 'm2'], ['1', 'nokey'],
              ['1', 'str'], ['1', 'w11'], ['1', 'd4'], ['2', 'm1', 'w11'], ['2', 'w11', 'nokey'],
              ['2', 'nokey', 'w11'], ['2', 'm1', 'm2', 'WEIGHTS', '1'], ['2', 'm1', 'm2', 'WEIGHTS', '1', '2', '3'],
              ['2', 'm1', 'm2', 'WEIGHTS', '1', 'x'], ['2', 'm1', 'WEIGHTS', '1', '2'], ['1', 'WEIGHTS', '1'],
              ['1', 'm1', 'WEIGHTS'], ['2', 'nokey', 'm2', 'WEIGHTS', 'x', '1'],
              ['2', 'm1', 'nokey', 'WEIGHTS', '1', 'x'], ['2', 'm1', 'w11', 'WEIGHTS', '1', 'x'],
              ['2', 'm1', 'm2', 'weights', '1', '1'], ['1', 'm1', 'Weights', '3'],
              ['3', 'm1', 'm2', 'WEIGHTS', '1', '1', '1'], ['1', 'weights'], ['2', 'weights', 'm1'],
              ['1', 'm1', 'WEIGHTS', '1', 'WEIGHTS'], ['99999999999', 'm1'], ['9223372036854775807', 'm1', 'WEIGHTS', '1'],
              ['1.0', 'm1'], ['', 'm1'], ['+1', 'm1'], ['01', 'm1'],
              ['2', 'm1', 'm1'], ['2', 'm1', 'm1', 'WEIGHTS', '2147483648', '2147483648'],
              ['1', 'm1', 'WEIGHTS', '-1']):
        do('CMS.MERGE', 'm3', *a)
    do('CMS.QUERY', 'm3', 'x', 'y', 'z', 'big')
    do('CMS.INFO', 'm3')
    r.section = 'keyspace'
    do('CMS.INITBYDIM', 'k', '7', '2')
    do('CMS.INCRBY', 'k', 'a', '3', 'b', '4')
    do('TYPE', 'k')
    do('OBJECT', 'ENCODING', 'k')
    do('EXISTS', 'k')
    for key in ('k', 'c', 'c1', 'c2', '', 'big', 'm3', 'p0', 'p1', 'p2', 'p16', 'p18', 'nokey'):
        do('MEMORY', 'USAGE', key)
    do('MEMORY', 'USAGE', 'k', 'SAMPLES', '0')
    do('COPY', 'k', 'k2')
    do('COPY', 'k', 'c', 'REPLACE')
    do('DUMP', 'k')
    do('DUMP', 'c')
    do('DUMP', 'c1')
    do('DUMP', 'c2')
    do('DUMP', 'm3')
    do('DUMP', '')
    do('DUMP', 'p1')
    dump = r.c(conn).call('DUMP', 'k')[1]
    dump_c2 = r.c(conn).call('DUMP', 'c2')[1]
    do('RESTORE', 'k', '0', dump)
    do('RESTORE', 'k', '0', dump, 'REPLACE')
    do('RESTORE', 'r1', '0', dump)
    do('CMS.QUERY', 'r1', 'a', 'b', 'c')
    do('CMS.INFO', 'r1')
    do('RESTORE', 'r2', '0', dump_c2)
    do('CMS.QUERY', 'r2', *items[:20])
    do('CMS.INFO', 'r2')
    do('DUMP', 'r2')
    do('RESTORE', 'str', '0', dump, 'REPLACE')
    do('TYPE', 'str')
    do('SET', 'str', 'v')
    do('RESTORE', 'r3', '0', dump[:-1] + bytes([dump[-1] ^ 1]))
    for note, p in (('hand-made 3x2, counters 1..6, total 21', cms_payload(3, 2, 21, struct.pack('<6I', 1, 2, 3, 4, 5, 6))),
                    ('hand-made 1x1 empty', cms_payload(1, 1, 0)),
                    ('counters one word short', cms_payload(3, 2, 0, b'\0' * 20)),
                    ('counters one word long', cms_payload(3, 2, 0, b'\0' * 28)),
                    ('width 0', cms_payload(0, 2, 0, b'')),
                    ('depth 0', cms_payload(3, 0, 0, b'')),
                    ('total 2^63', cms_payload(2, 1, 1 << 63, b'\0' * 8)),
                    ('total 2^64-1', cms_payload(2, 1, (1 << 64) - 1, b'\0' * 8)),
                    ('counter 2^32-1', cms_payload(2, 1, 5, b'\xff\xff\xff\xff\0\0\0\0')),
                    ('encver 1', cms_payload(2, 1, 0, b'\0' * 8, encver=1)),
                    ('huge width', cms_payload(1 << 62, 4, 0, b'\0' * 8))):
        key = 'h%d' % len(note)
        do('RESTORE', key, '0', p, 'REPLACE', note=note)
        do('CMS.INFO', key, note=note)
        do('CMS.QUERY', key, 'a', 'b', note=note)
        do('DUMP', key, note=note)
        do('DEL', key)
    do('RENAME', 'k', 'k3')
    do('CMS.QUERY', 'k3', 'a', 'b')
    do('CMS.INFO', 'k')
    do('EXPIRE', 'k3', '100')
    do('TTL', 'k3')
    do('PERSIST', 'k3')
    do('TTL', 'k3')
    do('SCAN', '0', 'TYPE', 'CMSk-TYPE', 'COUNT', '1000', unordered=True, volatile=True)
    do('DEL', 'k3', 'r1')
    do('EXISTS', 'k3')
    do('CMS.QUERY', 'k3', 'a')
    do('BF.ADD', 'c', 'x')
    do('CF.ADD', 'c', 'x')
    do('BF.EXISTS', 'c', 'x')
    do('GET', 'c')
    do('CMS.INCRBY', 'c', 'a', '1', 'b', '2')
    r.section = 'watch'
    other = conn + 'w'
    if conn == 'p3':
        r.hello3(other)
    for name, change in (('incrby', ('CMS.INCRBY', 'c', 'a', '1')),
                         ('incrby-zero', ('CMS.INCRBY', 'c', 'a', '0')),
                         ('incrby-missing', ('CMS.INCRBY', 'wnokey', 'a', '1')),
                         ('incrby-bad', ('CMS.INCRBY', 'c', 'a', 'x')),
                         ('incrby-overflow', ('CMS.INCRBY', 'c', 'a', '4294967296')),
                         ('initbydim-exists', ('CMS.INITBYDIM', 'c', '1', '1')),
                         ('initbydim-badarg', ('CMS.INITBYDIM', 'c', 'x', '1')),
                         ('merge-into', ('CMS.MERGE', 'c', '1', 'k')),
                         ('merge-bad', ('CMS.MERGE', 'c', 'x', 'k')),
                         ('merge-overflow', ('CMS.MERGE', 'c', '1', 'c', 'WEIGHTS', '-1')),
                         ('query', ('CMS.QUERY', 'c', 'a')),
                         ('info', ('CMS.INFO', 'c'))):
        do('DEL', 'k')
        do('CMS.INITBYDIM', 'k', '10', '3')
        do('WATCH', 'c', 'wnokey', note=name)
        r.do(*change, conn=other, note=name)
        do('MULTI', note=name)
        do('CMS.QUERY', 'c', 'a', note=name)
        do('EXEC', note=name)
    r.section = 'multi'
    do('MULTI')
    do('CMS.INCRBY', 'c', 'q', '5')
    do('CMS.QUERY', 'c', 'q')
    do('CMS.INFO', 'c')
    do('CMS.INCRBY', 'c', 'q', 'x')
    do('CMS.MERGE', 'c', '1', 'nokey')
    do('EXEC')


def area_cms(r):
    both(r, cms_cases)


TOPK_INCR_ERR = 'increment must be an integer'


def topk_cases(r, conn):
    """Top-K cases whose replies do not depend on RedisBloom's rand(): items
    that share no bucket (disjoint), or decay 1, where a colliding count
    always decays."""
    def do(*a, **kw):
        return r.do(*a, conn=conn, **kw)
    r.section = 'topk.reserve'
    do('SET', 'str', 'v')
    do('TOPK.RESERVE')
    do('TOPK.RESERVE', 't')
    do('TOPK.RESERVE', 't', '3', '10')
    do('TOPK.RESERVE', 't', '3', '10', '2')
    do('TOPK.RESERVE', 't', '3', '10', '2', '0.9', 'x')
    for a in (['0'], ['-1'], ['x'], ['4294967296'], ['1.5'], [''], ['3', '0', '2', '0.9'], ['3', 'x', '2', '0.9'],
              ['3', '4294967296', '2', '0.9'], ['3', '10', '0', '0.9'], ['3', '10', '4294967296', '0.9'],
              ['3', '10', 'x', '0.9'], ['3', '10', '2', '0'], ['3', '10', '2', '1.0000001'], ['3', '10', '2', 'x'],
              ['3', '10', '2', '-0.5'], ['3', '10', '2', 'nan'], ['3', '10', '2', 'inf'], ['x', 'x', 'x', 'x'],
              ['1', '4294967295', '4294967295', '0.5'], ['4294967295', '4294967295', '4294967295', '1'],
              ['3', '10', '2', '']):
        do('TOPK.RESERVE', 'bad', *a)
        do('DEL', 'bad')
    do('TOPK.RESERVE', 'str', '3')
    do('TOPK.RESERVE', 'str', 'x')
    do('TOPK.RESERVE', 'dflt', '5')
    do('TOPK.RESERVE', 'dflt', '5')
    do('TOPK.RESERVE', 'dflt', 'x', 'y', 'z', 'w')
    do('TOPK.INFO', 'dflt')
    do('TOPK.LIST', 'dflt')
    do('TOPK.LIST', 'dflt', 'WITHCOUNT')
    for i, dec in enumerate(('0.9', '1', '1.0', '0.5', '0.925', '1e-300', '0.999999999999', '.5', '5e-1', '0.1')):
        do('TOPK.RESERVE', 'd%d' % i, '2', '3', '1', dec)
        do('TOPK.INFO', 'd%d' % i)
    r.section = 'topk.add'
    do('TOPK.ADD')
    do('TOPK.ADD', 't')
    do('TOPK.ADD', 'nokey', 'a')
    do('TOPK.ADD', 'str', 'a')
    pool = disjoint(['i%d' % i for i in range(5000)], 1000, 4, 40)
    do('TOPK.RESERVE', 'w', '5', '1000', '4', '0.9')
    do('TOPK.ADD', 'w', *pool[:10])
    do('TOPK.LIST', 'w', 'WITHCOUNT')
    for n in range(1, 12):
        do('TOPK.ADD', 'w', *[pool[j] for j in range(n) for _ in range(n)])
    do('TOPK.LIST', 'w')
    do('TOPK.LIST', 'w', 'WITHCOUNT')
    do('TOPK.QUERY', 'w', *pool[:15])
    do('TOPK.COUNT', 'w', *pool[:15])
    do('TOPK.ADD', 'w', *([pool[20]] * 30))
    do('TOPK.LIST', 'w', 'WITHCOUNT')
    do('TOPK.ADD', 'w', *pool[21:40])
    do('TOPK.LIST', 'w', 'WITHCOUNT')
    r.section = 'topk.k1'
    do('TOPK.RESERVE', 'k1', '1', '1000', '3', '0.9')
    do('TOPK.ADD', 'k1', 'a', 'b', 'b', 'a', 'a', 'c')
    do('TOPK.LIST', 'k1', 'WITHCOUNT')
    do('TOPK.COUNT', 'k1', 'a', 'b', 'c')
    r.section = 'topk.decay1'
    # width 1 and decay 1: every other item's add decays the one counter.
    do('TOPK.RESERVE', 'one', '2', '1', '1', '1')
    do('TOPK.ADD', 'one', 'a', 'a', 'a', 'b')
    do('TOPK.LIST', 'one', 'WITHCOUNT')
    do('TOPK.COUNT', 'one', 'a', 'b')
    do('TOPK.ADD', 'one', 'b', 'b', 'c')
    do('TOPK.LIST', 'one', 'WITHCOUNT')
    do('TOPK.COUNT', 'one', 'a', 'b', 'c')
    do('TOPK.QUERY', 'one', 'a', 'b', 'c')
    do('TOPK.RESERVE', 'tiny', '3', '4', '2', '1')
    for rnd in range(6):
        do('TOPK.ADD', 'tiny', *['x%d' % ((rnd * 7 + j * 3) % 11) for j in range(9)])
        do('TOPK.LIST', 'tiny', 'WITHCOUNT')
    do('TOPK.COUNT', 'tiny', *['x%d' % j for j in range(11)])
    do('TOPK.QUERY', 'tiny', *['x%d' % j for j in range(11)])
    r.section = 'topk.incrby'
    do('TOPK.INCRBY')
    do('TOPK.INCRBY', 'tiny')
    do('TOPK.INCRBY', 'tiny', 'a')
    do('TOPK.INCRBY', 'tiny', 'a', '1', 'b')
    do('TOPK.INCRBY', 'nokey', 'a', '1')
    do('TOPK.INCRBY', 'nokey', 'a', 'x')
    do('TOPK.INCRBY', 'str', 'a', '1')
    do('TOPK.INCRBY', 'tiny', 'a', '-1')
    do('TOPK.INCRBY', 'tiny', 'a', 'x')
    do('TOPK.INCRBY', 'tiny', 'a', '100001')
    do('TOPK.INCRBY', 'tiny', 'a', '1.5')
    do('TOPK.INCRBY', 'tiny', 'a', '5', 'b', 'x')
    do('TOPK.INCRBY', 'tiny', 'a', '100000', 'b', '0', 'zz', '3')
    do('TOPK.LIST', 'tiny', 'WITHCOUNT')
    do('TOPK.COUNT', 'tiny', 'a', 'b', 'zz')
    do('TOPK.RESERVE', 'inc', '4', '100', '3', '1')
    do('TOPK.INCRBY', 'inc', 'a', '0')
    do('TOPK.LIST', 'inc', 'WITHCOUNT')
    do('TOPK.QUERY', 'inc', 'a')
    do('TOPK.INCRBY', 'inc', 'a', '7', 'b', '3', 'c', '50000', 'd', '1', 'e', '2')
    do('TOPK.LIST', 'inc', 'WITHCOUNT')
    do('TOPK.INCRBY', 'inc', 'e', '100000', 'e', '100000')
    do('TOPK.LIST', 'inc', 'WITHCOUNT')
    do('TOPK.COUNT', 'inc', 'a', 'b', 'c', 'd', 'e')
    r.section = 'topk.list'
    do('TOPK.LIST')
    do('TOPK.LIST', 'inc', 'WITHCOUNT', 'x')
    for a in ('WITHCOUNT', 'withcount', 'WithCount', 'w', 'WITH', '', 'WITHCOUNTS', 'x', 'COUNT'):
        do('TOPK.LIST', 'inc', a)
    do('TOPK.LIST', 'nokey', 'x')
    do('TOPK.LIST', 'nokey', 'WITHCOUNT')
    do('TOPK.LIST', 'str')
    r.section = 'topk.query-count-info'
    do('TOPK.QUERY')
    do('TOPK.QUERY', 'inc')
    do('TOPK.QUERY', 'nokey', 'a')
    do('TOPK.QUERY', 'str', 'a')
    do('TOPK.COUNT', 'inc')
    do('TOPK.COUNT', 'nokey', 'a')
    do('TOPK.COUNT', 'str', 'a')
    do('TOPK.INFO')
    do('TOPK.INFO', 'inc', 'x')
    do('TOPK.INFO', 'nokey')
    do('TOPK.INFO', 'str')
    r.section = 'topk.items'
    do('TOPK.RESERVE', 'bin', '4', '500', '3', '0.9')
    do('TOPK.ADD', 'bin', '', 'a\x00b', 'x' * 300)
    do('TOPK.LIST', 'bin', 'WITHCOUNT')
    do('TOPK.QUERY', 'bin', '', 'a\x00b', 'a', 'x' * 300)
    do('TOPK.COUNT', 'bin', '', 'a\x00b', 'a', 'x' * 300)
    do('DUMP', 'bin', note='heap item pointers differ per process')
    r.section = 'keyspace'
    do('TYPE', 'inc')
    do('OBJECT', 'ENCODING', 'inc')
    for key in ('inc', 'w', 'k1', 'one', 'tiny', 'dflt', 'bin', 'd0', 'nokey'):
        do('MEMORY', 'USAGE', key)
    do('COPY', 'inc', 'inc2')
    for key in ('inc', 'w', 'tiny', 'dflt', 'k1'):
        do('DUMP', key, note='heap item pointers differ per process')
    dump = r.c(conn).call('DUMP', 'w')[1]
    do('RESTORE', 'w', '0', dump, volatile=True)
    do('RESTORE', 'rw', '0', dump, volatile=True, note='the payload holds pointers: compared by the replies after it')
    do('TOPK.LIST', 'rw', 'WITHCOUNT')
    do('TOPK.COUNT', 'rw', *pool[:15])
    do('TOPK.QUERY', 'rw', *pool[:15])
    do('TOPK.INFO', 'rw')
    do('TOPK.ADD', 'rw', *pool[:12])
    do('TOPK.LIST', 'rw', 'WITHCOUNT')
    dump = r.c(conn).call('DUMP', 'bin')[1]
    do('RESTORE', 'rbin', '0', dump, volatile=True)
    do('TOPK.LIST', 'rbin', 'WITHCOUNT')
    do('TOPK.QUERY', 'rbin', '', 'a\x00b', 'a', 'x' * 300)
    # Hand-made payloads RedisBloom loads: used as sketches afterwards.
    fp = murmur2(b'ab', 1919)
    for note, p in (('hand-made 2x3x1', topk_payload(2, 3, 1, 0.9)),
                    ('hand-made with item ab, count 5',
                     topk_payload(2, 3, 1, 0.9, buckets=struct.pack('<II', fp, 5) + b'\0' * 16,
                                  heap=b'\0' * 24 + struct.pack('<IIQII', fp, 2, 0, 5, 0), items=[b'\0', b'ab\0'])),
                    ('decay 2 (RESERVE would refuse it)', topk_payload(2, 3, 1, 2.0)),
                    ('decay 0', topk_payload(2, 3, 1, 0.0))):
        key = 'h%d' % len(note)
        do('RESTORE', key, '0', p, 'REPLACE', note=note)
        do('TOPK.LIST', key, 'WITHCOUNT', note=note)
        do('TOPK.INFO', key, note=note)
        do('TOPK.ADD', key, 'ab', 'cd', 'ab', note=note)
        do('TOPK.LIST', key, 'WITHCOUNT', note=note)
        do('TOPK.COUNT', key, 'ab', 'cd', note=note)
        do('DEL', key)
    do('RENAME', 'inc', 'inc3')
    do('TOPK.LIST', 'inc3', 'WITHCOUNT')
    do('EXPIRE', 'inc3', '100')
    do('TTL', 'inc3')
    do('CMS.QUERY', 'inc3', 'a')
    do('BF.ADD', 'inc3', 'a')
    r.section = 'watch'
    other = conn + 'w'
    if conn == 'p3':
        r.hello3(other)
    for name, change in (('add', ('TOPK.ADD', 'inc3', 'q')),
                         ('add-missing', ('TOPK.ADD', 'wnokey', 'q')),
                         ('incrby-bad', ('TOPK.INCRBY', 'inc3', 'q', 'x')),
                         ('reserve-exists', ('TOPK.RESERVE', 'inc3', '3')),
                         ('reserve-badarg', ('TOPK.RESERVE', 'inc3', 'x')),
                         ('list', ('TOPK.LIST', 'inc3')),
                         ('query', ('TOPK.QUERY', 'inc3', 'a')),
                         ('count', ('TOPK.COUNT', 'inc3', 'a'))):
        do('WATCH', 'inc3', 'wnokey', note=name)
        r.do(*change, conn=other, note=name)
        do('MULTI', note=name)
        do('TOPK.INFO', 'inc3', note=name)
        do('EXEC', note=name)
    r.section = 'multi'
    do('MULTI')
    do('TOPK.ADD', 'inc3', 'm')
    do('TOPK.INCRBY', 'inc3', 'm', '2')
    do('TOPK.LIST', 'inc3', 'WITHCOUNT')
    do('TOPK.INCRBY', 'inc3', 'm', 'x')
    do('TOPK.ADD', 'nokey', 'm')
    do('EXEC')


def area_topk(r):
    both(r, topk_cases)


def tdigest_cases(r, conn):
    """What sketch/tdigest's own transcript leaves to the wiring: WATCH
    against every command (which ones touch the key), compressing reads
    inside MULTI, other types' commands on a digest and the t-digest's on
    other types, RESTORE with a TTL and REPLACE, RENAME and EXPIRE."""
    def do(*a, **kw):
        return r.do(*a, conn=conn, **kw)
    r.section = 'tdigest.setup'
    do('SET', 'str', 'v')
    do('TDIGEST.CREATE', 'd', 'COMPRESSION', '10')
    do('TDIGEST.ADD', 'd', *[str(x) for x in range(1, 41)])
    do('TDIGEST.INFO', 'd')
    r.section = 'watch'
    other = conn + 'w'
    if conn == 'p3':
        r.hello3(other)

    def fresh():
        do('DEL', 'w', 'src', 'wd')
        do('TDIGEST.CREATE', 'w', 'COMPRESSION', '10')
        do('TDIGEST.ADD', 'w', '1', '2', '3', '4', '5')
        do('TDIGEST.CREATE', 'src')
        do('TDIGEST.ADD', 'src', '7', '8')
    for name, change, watched in (
            ('create', ('TDIGEST.CREATE', 'wnew'), 'wnew'),
            ('create-exists', ('TDIGEST.CREATE', 'w'), 'w'),
            ('create-badarg', ('TDIGEST.CREATE', 'w', 'COMPRESSION', 'x'), 'w'),
            ('create-badarg-missing', ('TDIGEST.CREATE', 'wnew', 'COMPRESSION', 'x'), 'wnew'),
            ('create-wrongtype', ('TDIGEST.CREATE', 'str'), 'str'),
            ('reset', ('TDIGEST.RESET', 'w'), 'w'),
            ('reset-missing', ('TDIGEST.RESET', 'wnew'), 'wnew'),
            ('add', ('TDIGEST.ADD', 'w', '9'), 'w'),
            ('add-bad', ('TDIGEST.ADD', 'w', 'x'), 'w'),
            ('add-inf', ('TDIGEST.ADD', 'w', 'inf'), 'w'),
            ('add-missing', ('TDIGEST.ADD', 'wnew', '1'), 'wnew'),
            ('add-wrongtype', ('TDIGEST.ADD', 'str', '1'), 'str'),
            ('merge-into', ('TDIGEST.MERGE', 'w', '1', 'src'), 'w'),
            ('merge-new', ('TDIGEST.MERGE', 'wd', '1', 'src'), 'wd'),
            ('merge-source', ('TDIGEST.MERGE', 'wd', '1', 'w'), 'w'),
            ('merge-missing-source', ('TDIGEST.MERGE', 'w', '1', 'nosuch'), 'w'),
            ('merge-badarg', ('TDIGEST.MERGE', 'w', 'x', 'src'), 'w'),
            ('merge-override', ('TDIGEST.MERGE', 'w', '1', 'src', 'OVERRIDE'), 'w'),
            ('quantile', ('TDIGEST.QUANTILE', 'w', '0.5'), 'w'),
            ('cdf', ('TDIGEST.CDF', 'w', '3'), 'w'),
            ('trimmed-mean', ('TDIGEST.TRIMMED_MEAN', 'w', '0.1', '0.9'), 'w'),
            ('rank', ('TDIGEST.RANK', 'w', '3'), 'w'),
            ('byrank', ('TDIGEST.BYRANK', 'w', '2'), 'w'),
            ('min', ('TDIGEST.MIN', 'w'), 'w'),
            ('info', ('TDIGEST.INFO', 'w'), 'w'),
            ('dump', ('DUMP', 'w'), 'w')):
        fresh()
        do('WATCH', watched, note=name)
        r.do(*change, conn=other, note=name)
        do('MULTI', note=name)
        do('TDIGEST.INFO', 'w', note=name)
        do('EXEC', note=name)
        do('DEL', 'wnew')
    r.section = 'multi'
    fresh()
    do('MULTI')
    do('TDIGEST.INFO', 'w')
    do('TDIGEST.QUANTILE', 'w', '0.5')
    do('TDIGEST.INFO', 'w')
    do('EXEC')
    fresh()
    do('MULTI')
    do('TDIGEST.ADD', 'w', '10', '11')
    do('TDIGEST.RANK', 'w', '100', '-100')
    do('TDIGEST.INFO', 'w')
    do('TDIGEST.BYRANK', 'w', '0', '3', '100')
    do('TDIGEST.INFO', 'w')
    do('TDIGEST.CDF', 'w', 'x')
    do('TDIGEST.MERGE', 'w', '1', 'nosuch')
    do('DUMP', 'nosuch')
    do('EXEC')
    fresh()
    do('MULTI')
    do('TDIGEST.CREATE', 'w')
    do('TDIGEST.MIN', 'w')
    do('TDIGEST.MAX', 'w')
    do('EXEC')
    r.section = 'types'
    do('BF.ADD', 'd', 'x')
    do('CF.ADD', 'd', 'x')
    do('CMS.INCRBY', 'd', 'x', '1')
    do('TOPK.ADD', 'd', 'x')
    do('BF.EXISTS', 'd', 'x')
    do('GET', 'd')
    do('BF.RESERVE', 'b', '0.01', '100')
    do('CMS.INITBYDIM', 'c', '10', '2')
    for k in ('b', 'c', 'str'):
        do('TDIGEST.INFO', k)
        do('TDIGEST.MIN', k)
        do('TDIGEST.QUANTILE', k, '0.5')
        do('TDIGEST.QUANTILE', k, 'x')
        do('TDIGEST.MERGE', 'd', '1', k)
        do('TDIGEST.MERGE', k, '1', 'd')
    do('TDIGEST.MERGE', 'newdest', '2', 'd', 'b')
    do('EXISTS', 'newdest')
    do('TYPE', 'd')
    do('OBJECT', 'ENCODING', 'd')
    do('MEMORY', 'USAGE', 'd')
    do('TDIGEST.QUANTILE', 'd', '0.5')
    do('MEMORY', 'USAGE', 'd')
    r.section = 'keyspace'
    do('EXPIRE', 'd', '1000')
    do('RENAME', 'd', 'd2')
    do('TTL', 'd2')
    do('TDIGEST.ADD', 'd2', '100')
    do('TTL', 'd2')
    p = do('DUMP', 'd2')
    do('TDIGEST.INFO', 'd2')
    do('RESTORE', 'd3', '5000', p)
    do('PTTL', 'd3', volatile=True)
    do('TTL', 'd3')
    do('RESTORE', 'd3', '0', p)
    do('RESTORE', 'd3', '0', p, 'REPLACE')
    do('TTL', 'd3')
    do('RESTORE', 'str', '0', p, 'REPLACE')
    do('TYPE', 'str')
    do('TDIGEST.QUANTILE', 'str', '0', '0.5', '1')
    do('COPY', 'd2', 'd4')
    do('EXISTS', 'd4')
    do('RENAME', 'd2', 'd3')
    do('TDIGEST.INFO', 'd3')
    do('PERSIST', 'd3')
    do('UNLINK', 'd3', 'str')
    do('TDIGEST.INFO', 'd3')
    do('SET', 'str', 'v')


def area_tdigest(r):
    both(r, tdigest_cases)


def area_topk_refused(r):
    """Top-K payloads RedisBloom refuses, alone on their server: its failed
    loads damage the process's heap (a FLUSHALL after them crashed it), so
    only their replies are recorded, and nothing after them."""
    r.section = 'topk.restore-refused'
    for note, p in (('buckets short', topk_payload(2, 3, 1, 0.9, buckets=b'\0' * 16)),
                    ('buckets long', topk_payload(2, 3, 1, 0.9, buckets=b'\0' * 32)),
                    ('heap short', topk_payload(2, 3, 1, 0.9, heap=b'\0' * 24)),
                    ('heap long', topk_payload(2, 3, 1, 0.9, heap=b'\0' * 72)),
                    ('k 0', topk_payload(0, 3, 1, 0.9)),
                    ('width 0', topk_payload(2, 0, 1, 0.9)),
                    ('encver 1', topk_payload(2, 3, 1, 0.9, encver=1)),
                    ('one item missing', topk_payload(2, 3, 1, 0.9, items=[b'\0']))):
        r.do('RESTORE', 'refused', '0', p, 'REPLACE', note=note)


def area_sketchdocs(r):
    main = r.c('main')
    names = []
    for pat in ('cms.*', 'topk.*', 'tdigest.*'):
        names += sorted(cap.s(x) for x in main.call('COMMAND', 'LIST', 'FILTERBY', 'PATTERN', pat)[1])
    for proto in (2, 3):
        conn = 'p%d' % proto
        if proto == 3:
            r.hello3(conn)
        r.section = 'docs'
        for n in names:
            r.do('COMMAND', 'DOCS', n, conn=conn)
            r.do('COMMAND', 'INFO', n, conn=conn)
        r.do('COMMAND', 'DOCS', 'CMS.INCRBY', 'topk.add', conn=conn)
        r.section = 'acl'
        for c in ('cms', 'topk', 'tdigest', 'bloom', 'cuckoo', 'CMS', 'TDigest'):
            r.do('ACL', 'CAT', c, conn=conn, unordered=True)
        r.do('COMMAND', 'LIST', 'FILTERBY', 'ACLCAT', 'cms', conn=conn, unordered=True)
        r.do('COMMAND', 'LIST', 'FILTERBY', 'ACLCAT', 'topk', conn=conn, unordered=True)
        r.do('COMMAND', 'LIST', 'FILTERBY', 'PATTERN', 'cms.*', conn=conn, unordered=True)
        r.do('COMMAND', 'LIST', 'FILTERBY', 'PATTERN', 'topk.*', conn=conn, unordered=True)
        r.do('COMMAND', 'LIST', 'FILTERBY', 'ACLCAT', 'tdigest', conn=conn, unordered=True)
        r.do('COMMAND', 'LIST', 'FILTERBY', 'PATTERN', 'tdigest.*', conn=conn, unordered=True)
        r.do('COMMAND', 'DOCS', 'TDIGEST.MERGE', 'tdigest.add', conn=conn)
        r.section = 'getkeys'
        for a in (['CMS.INITBYDIM', 'k', '1', '1'], ['CMS.INITBYPROB', 'k', '0.1', '0.1'],
                  ['CMS.INCRBY', 'k', 'a', '1'], ['CMS.QUERY', 'k', 'a'], ['CMS.INFO', 'k'],
                  ['CMS.MERGE', 'k', '2', 'a', 'b'], ['CMS.MERGE', 'k', '1', 'a', 'WEIGHTS', '1'],
                  ['TOPK.RESERVE', 'k', '3'], ['TOPK.ADD', 'k', 'a'], ['TOPK.INCRBY', 'k', 'a', '1'],
                  ['TOPK.QUERY', 'k', 'a'], ['TOPK.COUNT', 'k', 'a'], ['TOPK.LIST', 'k'],
                  ['TOPK.INFO', 'k'],
                  ['TDIGEST.CREATE', 'k'], ['TDIGEST.CREATE', 'k', 'COMPRESSION', '10'],
                  ['TDIGEST.RESET', 'k'], ['TDIGEST.ADD', 'k', '1'], ['TDIGEST.MIN', 'k'],
                  ['TDIGEST.MAX', 'k'], ['TDIGEST.INFO', 'k'], ['TDIGEST.QUANTILE', 'k', '0.5'],
                  ['TDIGEST.CDF', 'k', '1'], ['TDIGEST.TRIMMED_MEAN', 'k', '0.1', '0.9'],
                  ['TDIGEST.RANK', 'k', '1'], ['TDIGEST.REVRANK', 'k', '1'],
                  ['TDIGEST.BYRANK', 'k', '1'], ['TDIGEST.BYREVRANK', 'k', '1'],
                  ['TDIGEST.MERGE', 'k', '2', 'a', 'b'], ['TDIGEST.MERGE', 'k', '1', 'a', 'OVERRIDE'],
                  ['TDIGEST.MERGE', 'k', '2', 'a', 'b', 'COMPRESSION', '10'],
                  ['TDIGEST.MERGE', 'k', '3', 'a', 'b'], ['TDIGEST.MERGE', 'k', '0', 'a'],
                  ['TDIGEST.MERGE', 'k', '-1', 'a'], ['TDIGEST.MERGE', 'k', 'x', 'a'],
                  ['TDIGEST.MERGE', 'k', '01', 'a'], ['TDIGEST.MERGE', 'k', '1', 'k'],
                  ['TDIGEST.MERGE', 'k', '2', 'a', 'b', 'c', 'd']):
            r.do('COMMAND', 'GETKEYS', *a, conn=conn)
            r.do('COMMAND', 'GETKEYSANDFLAGS', *a, conn=conn)


# Seeded random sessions ------------------------------------------------------

def cms_random(r, rng, proto, n):
    conn = 'main'
    if proto == 3:
        r.hello3(conn)
    r.do('FLUSHALL')
    keys = ['s%d' % i for i in range(6)]
    dims = {}
    items = ['i%d' % i for i in range(40)] + ['', 'x' * 50, 'b\x00\xff']

    def item():
        return rng.choice(items)
    for _ in range(n):
        k = rng.choice(keys + ['nokey', 'str'])
        op = rng.random()
        if op < 0.12:
            if rng.random() < 0.5:
                w, d = rng.choice([1, 2, 5, 10, 50, 200, 1000]), rng.choice([1, 2, 3, 5, 7])
                r.do('CMS.INITBYDIM', k, str(w), str(d))
            else:
                e = rng.choice(['0.5', '0.1', '0.05', '0.01', '0.002', '%.6f' % rng.uniform(0.001, 0.9)])
                p = rng.choice(['0.5', '0.1', '0.01', '0.001', '%.6g' % rng.uniform(1e-9, 0.99)])
                r.do('CMS.INITBYPROB', k, e, p)
        elif op < 0.55:
            args = []
            for _ in range(rng.randint(1, 8)):
                v = rng.choice([0, 1, 1, 1, 2, 3, 10, 100, rng.randint(0, 100000), 4294967295,
                                1 << 31, rng.randint(0, 1 << 40)])
                args += [item(), str(v)]
            if rng.random() < 0.03:
                args[rng.randrange(1, len(args), 2)] = rng.choice(['x', '-1', '1.5'])
            r.do('CMS.INCRBY', k, *args)
        elif op < 0.8:
            r.do('CMS.QUERY', k, *[item() for _ in range(rng.randint(1, 6))])
        elif op < 0.88:
            srcs = [rng.choice(keys) for _ in range(rng.randint(1, 3))]
            if rng.random() < 0.5:
                r.do('CMS.MERGE', k, str(len(srcs)), *srcs)
            else:
                ws = [str(rng.choice([0, 1, 1, 2, 3, -1, 1000])) for _ in srcs]
                r.do('CMS.MERGE', k, str(len(srcs)), *srcs, 'WEIGHTS', *ws)
        elif op < 0.93:
            r.do('CMS.INFO', k)
        elif op < 0.96:
            r.do('DUMP', k)
        elif op < 0.98:
            r.do('MEMORY', 'USAGE', k)
        elif op < 0.99:
            r.do('DEL', k)
        else:
            r.do('SET', 'str', 'v')


def topk_random(r, rng, proto, n):
    """Top-K sessions whose replies do not depend on RedisBloom's rand():
    each key either has decay 1 (a shared counter always decays) over a
    small item pool and narrow rows, or decay < 1 over items that share no
    counter."""
    if proto == 3:
        r.hello3('main')
    r.do('FLUSHALL')
    keys = {}
    for i in range(4):
        k = rng.choice([1, 2, 3, 5, 10, 20])
        if rng.random() < 0.5:
            w, d, decay = rng.choice([1, 2, 3, 8, 20]), rng.choice([1, 2, 3, 4]), '1'
            pool = ['p%d' % j for j in range(rng.randint(3, 30))] + ['', 'z' * 40]
        else:
            w, d = rng.choice([200, 500, 2000]), rng.choice([1, 3, 5, 7])
            decay = rng.choice(['0.9', '0.925', '0.5', '0.99'])
            pool = disjoint(['q%d-%d' % (i, j) for j in range(20000)], w, d, rng.randint(5, min(60, w // 3)))
        keys['t%d' % i] = (k, w, d, decay, pool)
    for name, (k, w, d, decay, pool) in keys.items():
        r.do('TOPK.RESERVE', name, str(k), str(w), str(d), decay)
    names = list(keys)
    for _ in range(n):
        name = rng.choice(names + ['nokey'])
        k, w, d, decay, pool = keys.get(name, keys[names[0]])
        # A skewed draw: a few items come often.
        def item():
            return pool[min(int(rng.paretovariate(1.2)) - 1, len(pool) - 1)]
        op = rng.random()
        if op < 0.35:
            r.do('TOPK.ADD', name, *[item() for _ in range(rng.randint(1, 10))])
        elif op < 0.5:
            args = []
            for _ in range(rng.randint(1, 5)):
                args += [item(), str(rng.choice([0, 1, 2, 5, 10, 100, rng.randint(0, 1000), 100000]))]
            if rng.random() < 0.05:
                args[-1] = rng.choice(['x', '-1', '100001'])
            r.do('TOPK.INCRBY', name, *args)
        elif op < 0.65:
            r.do('TOPK.QUERY', name, *[item() for _ in range(rng.randint(1, 6))])
        elif op < 0.8:
            r.do('TOPK.COUNT', name, *[item() for _ in range(rng.randint(1, 6))])
        elif op < 0.92:
            if rng.random() < 0.5:
                r.do('TOPK.LIST', name, 'WITHCOUNT')
            else:
                r.do('TOPK.LIST', name)
        elif op < 0.95:
            r.do('TOPK.INFO', name)
        elif op < 0.97:
            r.do('MEMORY', 'USAGE', name)
        elif op < 0.98:
            r.do('DUMP', name)
        elif name in keys:
            r.do('DEL', name)
            r.do('TOPK.RESERVE', name, str(k), str(w), str(d), decay)


def random_sessions(o, area, fn, count, ncmds, seedbase):
    for i in range(count):
        pid = cap.launch(o.launch, o.port, []) if o.launch else None
        try:
            path = os.path.join(o.out, '%s-%03d.jsonl' % (area, i))
            r = cap.Recorder(o.port, path)
            if not o.launch:
                r.silent('FLUSHALL')
            fn(r, random.Random(seedbase + i), 2 if i % 2 == 0 else 3, ncmds)
            r.close()
            print('%s: %d records' % (path, r.count), file=sys.stderr)
        finally:
            if pid:
                cap.stop(pid)
                time.sleep(0.2)


AREAS = {'cms': area_cms, 'topk': area_topk, 'topk-refused': area_topk_refused, 'tdigest': area_tdigest, 'sketchdocs': area_sketchdocs}
RANDOM = {'cms-random': (cms_random, 8, 400, 26000), 'topk-random': (topk_random, 8, 400, 26100)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, required=True)
    ap.add_argument('--launch')
    ap.add_argument('--out', default=HERE)
    ap.add_argument('areas', nargs='*')
    o = ap.parse_args()
    for name in o.areas or list(AREAS) + list(RANDOM):
        if name in RANDOM:
            random_sessions(o, name, *RANDOM[name])
            continue
        pid = cap.launch(o.launch, o.port, []) if o.launch else None
        try:
            r = cap.Recorder(o.port, os.path.join(o.out, name + '.jsonl'))
            if not o.launch:
                r.silent('FLUSHALL')
            AREAS[name](r)
            r.close()
            print('%s: %d records' % (name, r.count), file=sys.stderr)
        finally:
            if pid:
                cap.stop(pid)
                time.sleep(0.2)


if __name__ == '__main__':
    main()
