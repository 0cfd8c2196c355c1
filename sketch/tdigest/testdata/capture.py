#!/usr/bin/env python3
"""Capture RedisBloom 8.8.0's TDIGEST.* replies for sketch/tdigest's tests.

Standard library only. The RESP client and recorder are those of
testdata/oracle/capture.py (loaded from there, not copied). Every area runs
on a fresh server: with --launch the script starts one per area on --port
and kills it by PID afterwards; without it, point --port at a server you
started yourself (the script FLUSHALLs it).

    python3 capture.py --launch /work/shared/anchors/start-redisbloom --port 7540 \
        --out . [area ...]

Areas (default: all): transcript random format memusage.
Output: <area>.jsonl (random: random-NNN.jsonl), in the record format of
testdata/golden and testdata/oracle (see README.md here).
"""
import argparse
import importlib.util
import json
import math
import os
import random
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    'oracle_capture', os.path.join(HERE, '..', '..', '..', 'testdata', 'oracle', 'capture.py'))
oc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(oc)

Recorder = oc.Recorder
dumps = oc.dumps


def g17(x):
    """The shortest decimal that reads back as x (Python's repr)."""
    return repr(float(x))


def seal(body):
    """A DUMP payload around a value: RDB version 12 and Redis's CRC64."""
    b = body + struct.pack('<H', 12)
    return b + struct.pack('<Q', oc.crc64(b))


# ---------------------------------------------------------------------------
# Area 1: hand-written transcript, once per protocol

PARSE_CASES = ['1e400', '-1e400', '1e-400', '2e-324', '3e-324', '0e-400', '0x10', '0x1p3', '0x1.8',
               '0X1P-2', '0x', '0x.', '0x1p', '1e', '1e+', ' 1', '1 ', '+1', '-1', '.5', '5.', '1.e3',
               '.', '.e1', 'e5', '00.5', '', '-', '+', 'infinity', '-Infinity', 'inF', '+inf', 'infin',
               'nan', '-nan', 'NaN(12)', '1_0', '1e+5', '1.5E3', '1e308', '1.7976931348623157e308',
               '1.7976931348623159e308', '4.9e-324', '2.4703282292062327e-324',
               '2.4703282292062328e-324', '-0', '0', '1,5', '1e5x', '٣', '0x1g', '1e-310']


def transcript(r, conn):
    def do(*a, **kw):
        return r.do(*a, conn=conn, **kw)

    def sec(name):
        r.section = name

    sec('setup')
    do('FLUSHALL')
    do('SET', 'str', 'v')

    sec('tdigest.create')
    do('TDIGEST.CREATE')
    do('TDIGEST.CREATE', 'c0')
    do('TDIGEST.INFO', 'c0')
    do('TDIGEST.CREATE', 'c0')
    do('TDIGEST.CREATE', 'c0', 'COMPRESSION', '10', note='existing key is checked first')
    do('TDIGEST.CREATE', 'c0', 'FOO', '10', note='key check precedes the keyword check')
    do('TDIGEST.CREATE', 'str')
    do('TDIGEST.CREATE', 'str', 'FOO')
    do('TDIGEST.CREATE', 'c1', 'COMPRESSION')
    do('TDIGEST.CREATE', 'c1', 'COMPRESSION', '10', 'x')
    do('TDIGEST.CREATE', 'c1', 'FOO', '10')
    do('TDIGEST.CREATE', 'c1', '10', 'COMPRESSION', note='COMPRESSION found at argv[3]: argv[3] is parsed')
    do('TDIGEST.CREATE', 'c1', 'COMPRESSION', 'COMPRESSION')
    for c in ('abc', '0', '-1', '-0', '1.5', '+5', '007', ' 5', '5 ', '', '99999999999999999999',
              '9223372036854775807', '-9223372036854775808', '384307168202282316'):
        do('TDIGEST.CREATE', 'c1', 'COMPRESSION', c)
    for i, c in enumerate(('1', '2', '5', '50', '100', '1000', '12345', '1000000', '357913939', '357913940',
                           '400000000')):
        k = 'cc%d' % i
        do('TDIGEST.CREATE', k, 'compression', c)
        do('TDIGEST.INFO', k)
    do('TDIGEST.ADD', 'cc9', '1', note='negative capacity: every add overflows')
    do('TDIGEST.INFO', 'cc9')
    do('TDIGEST.QUANTILE', 'cc9', '0.5')
    do('TDIGEST.ADD', 'cc8', '1', '2', '3', note='capacity 2147483644')
    do('TDIGEST.QUANTILE', 'cc8', '0.5')
    do('TDIGEST.MERGE', 'ccm', '2', 'cc8', 'cc9', note='max compression 400000000: negative capacity')
    do('TDIGEST.MERGE', 'ccm', '1', 'cc8', 'OVERRIDE')
    do('TDIGEST.INFO', 'ccm')
    for k in ('cc7', 'cc8', 'cc9', 'cc10', 'ccm'):
        do('DEL', k)
    do('TDIGEST.CREATE', 'Cc', 'cOmPrEsSiOn', '7')
    do('TDIGEST.INFO', 'Cc')

    sec('tdigest.add')
    do('TDIGEST.ADD')
    do('TDIGEST.ADD', 'a')
    do('TDIGEST.ADD', 'nokey', '1')
    do('TDIGEST.ADD', 'str', '1')
    do('TDIGEST.ADD', 'nokey', 'abc', note='key checked before values')
    do('TDIGEST.CREATE', 'a')
    for v in PARSE_CASES:
        do('TDIGEST.RESET', 'a')
        do('TDIGEST.ADD', 'a', v)
        do('TDIGEST.MIN', 'a')
        do('TDIGEST.INFO', 'a')
    do('TDIGEST.RESET', 'a')
    do('TDIGEST.ADD', 'a', '1', 'nan', 'inf', note='values all parsed before any is added')
    do('TDIGEST.ADD', 'a', '1', 'inf', 'nan')
    do('TDIGEST.ADD', 'a', '1', '2', 'x')
    do('TDIGEST.INFO', 'a')
    do('TDIGEST.ADD', 'a', '5')
    do('TDIGEST.INFO', 'a', note='one value stays unmerged')
    do('TDIGEST.QUANTILE', 'a', '0.5', note='one value: the buffer is not merged, quantiles are nan')
    do('TDIGEST.CDF', 'a', '5')
    do('TDIGEST.RANK', 'a', '5', '4', '6')
    do('TDIGEST.BYRANK', 'a', '0', '1', '2')
    do('TDIGEST.TRIMMED_MEAN', 'a', '0', '1')
    do('TDIGEST.MIN', 'a')
    do('TDIGEST.MAX', 'a')
    do('TDIGEST.INFO', 'a')
    do('TDIGEST.ADD', 'a', '5')
    do('TDIGEST.QUANTILE', 'a', '0.5')
    do('TDIGEST.INFO', 'a')
    do('TDIGEST.ADD', 'a', *[str(i) for i in range(1000)])
    do('TDIGEST.INFO', 'a')
    do('TDIGEST.QUANTILE', 'a', '0', '0.001', '0.01', '0.1', '0.5', '0.9', '0.99', '0.999', '1')
    do('TDIGEST.INFO', 'a')
    do('TDIGEST.ADD', 'a', '1e308', '-1e308', '5e-324', '-5e-324', '1.7976931348623157e308')
    do('TDIGEST.MIN', 'a')
    do('TDIGEST.MAX', 'a')
    do('TDIGEST.QUANTILE', 'a', '0', '0.0001', '0.5', '0.9999', '1')
    do('TDIGEST.CDF', 'a', '-inf', '-1e308', '0', '500', '1e308', 'inf')
    do('TDIGEST.TRIMMED_MEAN', 'a', '0', '1')
    do('TDIGEST.TRIMMED_MEAN', 'a', '0.01', '0.99')
    do('TDIGEST.INFO', 'a')
    do('TDIGEST.CREATE', 'same')
    do('TDIGEST.ADD', 'same', *(['7'] * 700), note='a constant stream: equal means through compress')
    do('TDIGEST.INFO', 'same')
    do('TDIGEST.QUANTILE', 'same', '0', '0.5', '1')
    do('TDIGEST.ADD', 'same', *(['7', '8'] * 300))
    do('TDIGEST.QUANTILE', 'same', '0', '0.25', '0.5', '0.75', '1')
    do('TDIGEST.CDF', 'same', '7', '7.5', '8')
    do('TDIGEST.RANK', 'same', '7', '7.5', '8')
    do('TDIGEST.INFO', 'same')
    do('TDIGEST.CREATE', 'z')
    do('TDIGEST.ADD', 'z', '-0', '0', '-0', '0')
    do('TDIGEST.QUANTILE', 'z', '0', '0.5', '1')
    do('TDIGEST.MIN', 'z')
    do('TDIGEST.MAX', 'z')
    do('TDIGEST.CDF', 'z', '0', '-0')

    sec('tdigest.reset')
    do('TDIGEST.RESET')
    do('TDIGEST.RESET', 'a', 'b')
    do('TDIGEST.RESET', 'nokey')
    do('TDIGEST.RESET', 'str')
    do('TDIGEST.RESET', 'a')
    do('TDIGEST.INFO', 'a')
    do('TDIGEST.MIN', 'a')
    do('TDIGEST.QUANTILE', 'a', '0.5')
    do('TDIGEST.RESET', 'cc3')
    do('TDIGEST.INFO', 'cc3')

    sec('tdigest.merge')
    do('TDIGEST.CREATE', 'm1', 'COMPRESSION', '20')
    do('TDIGEST.ADD', 'm1', *[str(i) for i in range(0, 300, 3)])
    do('TDIGEST.CREATE', 'm2', 'COMPRESSION', '50')
    do('TDIGEST.ADD', 'm2', *[str(i * 0.5) for i in range(200)])
    do('TDIGEST.CREATE', 'm3')
    do('TDIGEST.INFO', 'm1')
    do('TDIGEST.INFO', 'm2')
    do('TDIGEST.MERGE')
    do('TDIGEST.MERGE', 'd')
    do('TDIGEST.MERGE', 'd', '1')
    do('TDIGEST.MERGE', 'd', 'x', 'm1')
    do('TDIGEST.MERGE', 'd', '0', 'm1')
    do('TDIGEST.MERGE', 'd', '-1', 'm1')
    do('TDIGEST.MERGE', 'd', '2', 'm1')
    do('TDIGEST.MERGE', 'd', '1.0', 'm1')
    do('TDIGEST.MERGE', 'str', 'x', 'm1', note='destination type checked before numkeys')
    do('TDIGEST.MERGE', 'str', '1', 'm1')
    do('TDIGEST.MERGE', 'd', '1', 'nokey')
    do('TDIGEST.MERGE', 'd', '1', 'str')
    do('TDIGEST.MERGE', 'd', '2', 'm1', 'nokey')
    do('TDIGEST.MERGE', 'd', '1', 'm1', 'FOO')
    do('TDIGEST.MERGE', 'd', '1', 'm1', 'COMPRESSION')
    do('TDIGEST.MERGE', 'd', '1', 'm1', 'COMPRESSION', 'x')
    do('TDIGEST.MERGE', 'd', '1', 'm1', 'COMPRESSION', '0')
    do('TDIGEST.MERGE', 'd', '1', 'm1', 'OVERRIDE', 'COMPRESSION')
    do('TDIGEST.MERGE', 'd', '1', 'nokey', 'FOO', note='keyword checked before the sources')
    do('TDIGEST.MERGE', 'd', '1', 'nokey', 'COMPRESSION', 'x')
    do('TDIGEST.MERGE', 'd', '1', 'd', note='source = missing destination')
    do('EXISTS', 'd')
    do('TDIGEST.INFO', 'm1', note='sources compressed by a failed merge?')
    do('TDIGEST.ADD', 'm1', '1000', '1001')
    do('TDIGEST.INFO', 'm1')
    do('TDIGEST.MERGE', 'd', '2', 'm1', 'm2')
    do('TDIGEST.INFO', 'd', note='new destination: the largest source compression')
    do('TDIGEST.INFO', 'm1', note='a source is compressed by MERGE')
    do('TDIGEST.QUANTILE', 'd', '0', '0.1', '0.5', '0.9', '1')
    do('TDIGEST.MERGE', 'd', '1', 'm3')
    do('TDIGEST.INFO', 'd', note='existing destination: its own compression, its data kept')
    do('TDIGEST.MERGE', 'd', '1', 'm1', 'OVERRIDE')
    do('TDIGEST.INFO', 'd', note='OVERRIDE: largest source compression, old data dropped')
    do('TDIGEST.MERGE', 'd', '1', 'm2', 'COMPRESSION', '300')
    do('TDIGEST.INFO', 'd')
    do('TDIGEST.MERGE', 'd', '2', 'm2', 'd', 'override', 'compression', '40', 'junk')
    do('TDIGEST.INFO', 'd')
    do('TDIGEST.QUANTILE', 'd', '0', '0.5', '1')
    do('TDIGEST.MERGE', 'd', '1', 'd')
    do('TDIGEST.INFO', 'd', note='destination as source: merged twice')
    do('TDIGEST.MERGE', 'd', '3', 'm1', 'm1', 'm1', 'COMPRESSION', '5')
    do('TDIGEST.INFO', 'd')
    do('TDIGEST.CDF', 'd', '0', '50', '100', '299')
    do('TDIGEST.MERGE', 'e', '1', 'm3')
    do('TDIGEST.INFO', 'e')
    do('TDIGEST.MERGE', 'e2', '2', 'm3', 'm3', 'OVERRIDE')
    do('TDIGEST.INFO', 'e2')
    do('TDIGEST.MERGE', 'one', '1', 'a')
    do('TDIGEST.MERGE', 'f', '1', 'cc0', note='compression 1 destination')
    do('TDIGEST.MERGE', 'f', '2', 'm1', 'm2')
    do('TDIGEST.INFO', 'f')
    do('TDIGEST.QUANTILE', 'f', '0', '0.3', '0.6', '1')

    sec('tdigest.min')
    do('TDIGEST.MIN')
    do('TDIGEST.MIN', 'a', 'b')
    do('TDIGEST.MIN', 'nokey')
    do('TDIGEST.MIN', 'str')
    do('TDIGEST.MIN', 'm3')
    do('TDIGEST.MIN', 'm1')
    do('TDIGEST.MAX')
    do('TDIGEST.MAX', 'a', 'b')
    do('TDIGEST.MAX', 'nokey')
    do('TDIGEST.MAX', 'str')
    do('TDIGEST.MAX', 'm3')
    do('TDIGEST.MAX', 'm1')

    sec('tdigest.quantile')
    do('TDIGEST.QUANTILE')
    do('TDIGEST.QUANTILE', 'm1')
    do('TDIGEST.QUANTILE', 'nokey', '0.5')
    do('TDIGEST.QUANTILE', 'str', '0.5')
    do('TDIGEST.QUANTILE', 'nokey', 'x')
    for q in ('x', 'nan', '-0.1', '1.1', 'inf', '-inf', '1e-400', '0x0.8', '-0', '1'):
        do('TDIGEST.QUANTILE', 'm1', q)
    do('TDIGEST.QUANTILE', 'm1', '0.5', 'x', '2')
    do('TDIGEST.QUANTILE', 'm1', '2', 'x')
    do('TDIGEST.QUANTILE', 'm3', '0', '0.5', '1')
    do('TDIGEST.QUANTILE', 'm1', '0.9', '0.1', '0.5', '0.5', '0.2', '1', '0', '0.75')
    do('TDIGEST.QUANTILE', 'm1', *[g17(i / 64) for i in range(65)])
    do('TDIGEST.QUANTILE', 'm2', *[g17(1 - i / 50) for i in range(51)])

    sec('tdigest.cdf')
    do('TDIGEST.CDF')
    do('TDIGEST.CDF', 'm1')
    do('TDIGEST.CDF', 'nokey', '1')
    do('TDIGEST.CDF', 'str', '1')
    for v in ('x', 'nan', '1e400', '1,5'):
        do('TDIGEST.CDF', 'm1', v)
    do('TDIGEST.CDF', 'm1', '1', 'x')
    do('TDIGEST.CDF', 'm3', '0', '1')
    do('TDIGEST.CDF', 'm1', '-inf', '-1', '0', '0.5', '1', '3', '150', '297', '298', '1000', '1001', '1002',
       'inf')
    do('TDIGEST.CDF', 'm2', *[g17(i * 1.37) for i in range(80)])

    sec('tdigest.trimmed_mean')
    do('TDIGEST.TRIMMED_MEAN')
    do('TDIGEST.TRIMMED_MEAN', 'm1')
    do('TDIGEST.TRIMMED_MEAN', 'm1', '0.1')
    do('TDIGEST.TRIMMED_MEAN', 'm1', '0.1', '0.9', '1')
    do('TDIGEST.TRIMMED_MEAN', 'nokey', '0.1', '0.9')
    do('TDIGEST.TRIMMED_MEAN', 'str', '0.1', '0.9')
    do('TDIGEST.TRIMMED_MEAN', 'nokey', 'x', 'y')
    for lo, hi in (('x', '0.9'), ('0.1', 'x'), ('x', 'y'), ('nan', '1'), ('0', 'nan'), ('-0.1', '0.9'),
                   ('0.1', '1.1'), ('2', 'x'), ('0.5', '0.5'), ('0.6', '0.5'), ('1', '0'), ('-1', '-2'),
                   ('inf', '1'), ('0', '1'), ('0', '0.5'), ('0.5', '1'), ('0.25', '0.75'), ('0.1', '0.2'),
                   ('0.0001', '0.0002'), ('0.99', '1'), ('0', '0.001')):
        do('TDIGEST.TRIMMED_MEAN', 'm1', lo, hi)
    do('TDIGEST.TRIMMED_MEAN', 'm3', '0.1', '0.9')
    do('TDIGEST.TRIMMED_MEAN', 'm2', '0.1', '0.9')
    do('TDIGEST.TRIMMED_MEAN', 'd', '0.3', '0.7')

    sec('tdigest.rank')
    for cmd in ('TDIGEST.RANK', 'TDIGEST.REVRANK'):
        do(cmd)
        do(cmd, 'm1')
        do(cmd, 'nokey', '1')
        do(cmd, 'str', '1')
        do(cmd, 'nokey', 'x')
        for v in ('x', 'nan', '1e400'):
            do(cmd, 'm1', v)
        do(cmd, 'm1', '1', 'nan')
        do(cmd, 'm3', '1', '-inf', 'inf')
        do(cmd, 'm1', '-inf', '-1', '0', '0.5', '1', '2', '3', '100', '150', '297', '298', '999', '1000', '1001',
           '1002', 'inf')
        do(cmd, 'm2', *[g17(i * 0.77) for i in range(0, 140)])
        do(cmd, 'same', '6', '7', '7.5', '8', '9')

    sec('tdigest.byrank')
    for cmd in ('TDIGEST.BYRANK', 'TDIGEST.BYREVRANK'):
        do(cmd)
        do(cmd, 'm1')
        do(cmd, 'nokey', '1')
        do(cmd, 'str', '1')
        do(cmd, 'nokey', 'x')
        for v in ('x', '1.5', '-1', '-0', '+1', '01', '9223372036854775808', '1e3'):
            do(cmd, 'm1', v)
        do(cmd, 'm1', '-1', 'x')
        do(cmd, 'm1', 'x', '-1')
        do(cmd, 'm3', '0', '1')
        do(cmd, 'm1', '0', '1', '2', '50', '100', '101', '102', '103', '1000', '9223372036854775807')
        do(cmd, 'm2', *[str(i) for i in range(0, 205, 3)])

    sec('tdigest.info')
    do('TDIGEST.INFO')
    do('TDIGEST.INFO', 'a', 'b')
    do('TDIGEST.INFO', 'nokey')
    do('TDIGEST.INFO', 'str')

    sec('compress-points')
    do('TDIGEST.CREATE', 'p', 'COMPRESSION', '10')
    do('TDIGEST.ADD', 'p', *[str(i) for i in range(30)])
    do('TDIGEST.INFO', 'p', note='capacity 70: 30 values buffered')
    do('TDIGEST.MIN', 'p')
    do('TDIGEST.MAX', 'p')
    do('TDIGEST.INFO', 'p', note='MIN/MAX/INFO do not compress')
    do('DUMP', 'p')
    do('TDIGEST.INFO', 'p', note='DUMP compresses (td_compress in rdb_save)')
    do('TDIGEST.ADD', 'p', *[str(i) for i in range(30, 60)])
    for q in (('TDIGEST.CDF', 'p', '5'), ('TDIGEST.QUANTILE', 'p', '0.5'), ('TDIGEST.RANK', 'p', '5'),
              ('TDIGEST.REVRANK', 'p', '5'), ('TDIGEST.BYRANK', 'p', '5'), ('TDIGEST.BYREVRANK', 'p', '5'),
              ('TDIGEST.TRIMMED_MEAN', 'p', '0.1', '0.9'), ('TDIGEST.BYRANK', 'p', '0'),
              ('TDIGEST.RANK', 'p', '-100')):
        do(*q)
        do('TDIGEST.INFO', 'p')
        do('TDIGEST.ADD', 'p', '1000')
        do('TDIGEST.INFO', 'p')
    do('TDIGEST.ADD', 'p', *[str(i) for i in range(100)])
    do('TDIGEST.INFO', 'p', note='buffer full: compress inside ADD')
    do('MEMORY', 'USAGE', 'p')
    do('TDIGEST.INFO', 'p', note='MEMORY USAGE does not compress')

    sec('keyspace')
    do('TYPE', 'p')
    do('OBJECT', 'ENCODING', 'p')
    do('EXISTS', 'p')
    do('SCAN', '0', 'TYPE', 'TDIS-TYPE', 'MATCH', 'p*', 'COUNT', '1000')
    do('COPY', 'p', 'pcopy')
    do('RENAME', 'p', 'p2')
    do('TDIGEST.INFO', 'p2')
    do('TDIGEST.INFO', 'p')
    for k in ('p2', 'a', 'm1', 'm2', 'm3', 'd', 'z', 'same', 'c0', 'cc0', 'cc6'):
        payload = r.do('DUMP', k, conn=conn)
        do('RESTORE', k + 'r', '0', payload)
        do('TDIGEST.INFO', k + 'r')
        do('TDIGEST.QUANTILE', k + 'r', '0', '0.25', '0.5', '0.75', '1')
        do('TDIGEST.CDF', k + 'r', '0', '1', '50')
        do('DUMP', k + 'r')
        do('DEL', k + 'r')
    do('RESTORE', 'p2', '0', r.c(conn).call('DUMP', 'm1')[1], note='target exists')
    do('RESTORE', 'p2', '0', r.c(conn).call('DUMP', 'm1')[1], 'REPLACE')
    do('TDIGEST.INFO', 'p2')
    do('TDIGEST.CREATE', 'one1')
    do('TDIGEST.ADD', 'one1', '42')
    single = r.do('DUMP', 'one1', conn=conn)
    do('TDIGEST.INFO', 'one1')
    do('RESTORE', 'one2', '0', single)
    do('TDIGEST.INFO', 'one2', note='one unmerged node, not saved: restored as mean 0 weight 0')
    do('TDIGEST.MIN', 'one2')
    do('TDIGEST.QUANTILE', 'one2', '0.5')
    do('TDIGEST.ADD', 'one2', '43')
    do('TDIGEST.QUANTILE', 'one2', '0', '0.25', '0.5', '0.75', '1')
    do('TDIGEST.CDF', 'one2', '0', '42', '43')
    do('TDIGEST.INFO', 'one2')
    do('DUMP', 'one2')
    body = single[:-10]
    do('RESTORE', 'bad1', '0', seal(body[:-9]), note='value cut short')
    do('RESTORE', 'bad2', '0', single[:-1] + bytes([single[-1] ^ 1]), note='bad checksum')
    do('EXISTS', 'bad1', 'bad2')
    do('DEL', 'one1', 'one2', 'p2', 'same', 'z')
    do('TDIGEST.CREATE', 'e1')
    do('EXPIRE', 'e1', '1000')
    do('TDIGEST.ADD', 'e1', '1')
    do('TTL', 'e1')
    do('TDIGEST.RESET', 'e1')
    do('TTL', 'e1')
    do('TDIGEST.MERGE', 'e1', '1', 'm1')
    do('TTL', 'e1', note='MERGE sets a new value (RM_ModuleTypeSetValue deletes the key first): no TTL')
    do('EXPIRE', 'm1', '1000')
    do('TDIGEST.MERGE', 'e1', '1', 'm1')
    do('TTL', 'm1', note='a source keeps its TTL')
    do('PERSIST', 'm1')
    do('DEL', 'e1')

    sec('case')
    do('tdigest.create', 'lc')
    do('TDigest.Add', 'lc', '1', '2')
    do('tdigest.quantile', 'lc', '0.5')
    do('TDIGEST.info', 'lc')

    sec('multi')
    do('MULTI')
    do('TDIGEST.ADD', 'lc', '3')
    do('TDIGEST.QUANTILE', 'lc', '0.5')
    do('TDIGEST.ADD', 'nokey', '3')
    do('EXEC')
    do('MULTI')
    do('TDIGEST.ADD', 'lc')
    do('TDIGEST.MIN', 'lc')
    do('EXEC')
    do('MULTI')
    do('TDIGEST.CREATE', 'lc2', 'COMPRESSION')
    do('EXEC', note='CREATE with 3 arguments passes the core arity (-2); the module rejects it')

    sec('commands')
    names = ['tdigest.add', 'tdigest.byrank', 'tdigest.byrevrank', 'tdigest.cdf', 'tdigest.create',
             'tdigest.info', 'tdigest.max', 'tdigest.merge', 'tdigest.min', 'tdigest.quantile',
             'tdigest.rank', 'tdigest.reset', 'tdigest.revrank', 'tdigest.trimmed_mean']
    for n in names:
        do('COMMAND', 'INFO', n)
        do('COMMAND', 'DOCS', n)
    do('COMMAND', 'LIST', 'FILTERBY', 'ACLCAT', 'tdigest', volatile=True, unordered=True)
    do('ACL', 'CAT', 'tdigest', volatile=True, unordered=True)
    do('COMMAND', 'GETKEYS', 'TDIGEST.MERGE', 'd', '2', 'a', 'b', 'COMPRESSION', '10')
    do('COMMAND', 'GETKEYS', 'TDIGEST.ADD', 'k', '1')
    do('FLUSHALL')


def area_transcript(r):
    transcript(r, 'p2')
    r.hello3('p3')
    transcript(r, 'p3')


# ---------------------------------------------------------------------------
# Area 2: seeded random sessions


class Gen:
    """Random TDIGEST sessions: a few digests with small compressions (so
    buffers fill and compress often), values from several distributions
    (duplicate-heavy integers, normal, exponential, constant, extreme), and
    about 12% invalid commands."""
    KEYS = ['t1', 't2', 't3', 't4']

    def __init__(self, seed):
        self.rnd = random.Random(seed)
        self.dumps = []

    def key(self):
        x = self.rnd.random()
        if x < 0.9:
            return self.rnd.choice(self.KEYS)
        return self.rnd.choice(['s', 'missing', 'nk'])

    def value(self, dist):
        r = self.rnd
        if dist == 'int':
            return str(r.randint(0, 50))
        if dist == 'normal':
            return '%.6g' % r.gauss(100, 15)
        if dist == 'exp':
            return '%.8g' % r.expovariate(0.1)
        if dist == 'const':
            return '42'
        if dist == 'wide':
            return g17(r.choice([-1, 1]) * 10 ** r.uniform(-300, 300))
        if dist == 'tiny':
            return g17(r.uniform(-1e-300, 1e-300))
        return g17(r.uniform(-1e6, 1e6))

    def values(self):
        r = self.rnd
        dist = r.choice(['int', 'int', 'normal', 'exp', 'const', 'wide', 'tiny', 'uniform'])
        n = r.choice([1, 1, 2, 3, 5, 10, 20, 50, 100, 300])
        return [self.value(dist) for _ in range(n)]

    def quantiles(self):
        r = self.rnd
        n = r.choice([1, 1, 2, 3, 5, 9])
        qs = [r.choice(['0', '1', '0.5', '0.001', '0.999', '0.25', '0.75', g17(r.random())]) for _ in range(n)]
        if r.random() < 0.5:
            qs.sort(key=float)
        return qs

    def point(self):
        r = self.rnd
        return r.choice(['-inf', 'inf', '0', '42', '50', '100', g17(r.gauss(100, 30)), g17(r.uniform(-10, 60)),
                         str(r.randint(0, 50))])

    def command(self):
        r = self.rnd
        x = r.random()
        k = self.key()
        if x < 0.34:
            return ['TDIGEST.ADD', k] + self.values()
        if x < 0.40:
            return ['TDIGEST.QUANTILE', k] + self.quantiles()
        if x < 0.45:
            return ['TDIGEST.CDF', k] + [self.point() for _ in range(r.choice([1, 2, 4]))]
        if x < 0.50:
            return [r.choice(['TDIGEST.RANK', 'TDIGEST.REVRANK']), k] + \
                [self.point() for _ in range(r.choice([1, 2, 4]))]
        if x < 0.55:
            return [r.choice(['TDIGEST.BYRANK', 'TDIGEST.BYREVRANK']), k] + \
                [str(r.choice([0, 1, 2, 5, 10, 50, 100, 500, 1000, 5000, r.randint(0, 3000)]))
                 for _ in range(r.choice([1, 2, 4]))]
        if x < 0.59:
            lo = r.choice([0, 0.01, 0.1, 0.25, 0.5, round(r.random(), 3)])
            hi = r.choice([1, 0.99, 0.9, 0.75, 0.5, round(r.random(), 3)])
            return ['TDIGEST.TRIMMED_MEAN', k, g17(lo), g17(hi)]
        if x < 0.63:
            return [r.choice(['TDIGEST.MIN', 'TDIGEST.MAX']), k]
        if x < 0.70:
            return ['TDIGEST.INFO', k]
        if x < 0.78:
            n = r.choice([1, 1, 2, 3])
            srcs = [r.choice(self.KEYS) for _ in range(n)]
            cmd = ['TDIGEST.MERGE', r.choice(self.KEYS + ['t5']), str(n)] + srcs
            y = r.random()
            if y < 0.3:
                cmd += ['COMPRESSION', str(r.choice([5, 10, 30, 100, 200]))]
            elif y < 0.5:
                cmd += ['OVERRIDE']
            elif y < 0.6:
                cmd += ['OVERRIDE', 'COMPRESSION', str(r.choice([5, 20, 100]))]
            return cmd
        if x < 0.80:
            return ['TDIGEST.RESET', k]
        if x < 0.86:
            return ['TDIGEST.CREATE', k] + (['COMPRESSION', str(r.choice([1, 2, 5, 10, 20, 50, 100, 300]))]
                                            if r.random() < 0.85 else [])
        if x < 0.90:
            return ['DUMP', k]
        if x < 0.935:
            if self.dumps:
                return ['RESTORE', r.choice(self.KEYS + ['t5']), '0', r.choice(self.dumps), 'REPLACE']
            return ['DUMP', k]
        if x < 0.95:
            return ['DEL', k]
        if x < 0.96:
            return ['SET', 's', 'v']
        if x < 0.97:
            return ['TYPE', k]
        return ['TDIGEST.INFO', 't5']

    def mutate(self, cmd):
        """An invalid variant of cmd: arity, bad numbers, bad options."""
        r = self.rnd
        name = cmd[0]
        if not name.startswith('TDIGEST.'):
            return cmd
        y = r.random()
        if y < 0.2:
            return cmd[:2] if len(cmd) > 2 else cmd[:1]
        if name == 'TDIGEST.ADD' and len(cmd) > 2:
            i = r.randrange(2, len(cmd))
            cmd[i] = r.choice(['nan', 'inf', '-inf', 'x', '1e400', ''])
        elif name in ('TDIGEST.QUANTILE', 'TDIGEST.CDF', 'TDIGEST.RANK', 'TDIGEST.REVRANK') and len(cmd) > 2:
            cmd[r.randrange(2, len(cmd))] = r.choice(['nan', '-0.5', '1.5', 'x', '1e400'])
        elif name in ('TDIGEST.BYRANK', 'TDIGEST.BYREVRANK') and len(cmd) > 2:
            cmd[r.randrange(2, len(cmd))] = r.choice(['-1', '1.5', 'x', '01'])
        elif name == 'TDIGEST.TRIMMED_MEAN':
            cmd[r.choice([2, 3])] = r.choice(['x', '-0.1', '1.5', '0.5'])
        elif name == 'TDIGEST.MERGE':
            z = r.random()
            if z < 0.3:
                cmd[2] = r.choice(['0', '-1', 'x', '9'])
            elif z < 0.6:
                cmd += [r.choice(['FOO', 'COMPRESSION', 'COMPRESSION 0', 'COMPRESSION x'])]
                cmd = cmd[:-1] + cmd[-1].split()
            else:
                cmd[3] = r.choice(['nk', 's'])
        elif name == 'TDIGEST.CREATE':
            cmd = cmd[:2] + r.choice([['COMPRESSION'], ['FOO', '10'], ['COMPRESSION', '0'],
                                      ['COMPRESSION', '-5'], ['COMPRESSION', '1.5']])
        else:
            cmd = cmd + ['extra']  # MIN, MAX, INFO, RESET: arity
        return cmd

    def setup(self):
        out = [['TDIGEST.CREATE', k, 'COMPRESSION', str(self.rnd.choice([1, 5, 10, 20, 50, 100]))]
               for k in self.KEYS]
        return out + [['SET', 's', 'v']]

    def next(self, exists):
        """The next command; exists(key) says whether a key holds a value
        now, so that most commands find their digest."""
        cmd = self.command()
        name = cmd[0]
        if name.startswith('TDIGEST.') and name not in ('TDIGEST.CREATE', 'TDIGEST.MERGE') and \
                cmd[1] in self.KEYS and not exists(cmd[1]) and self.rnd.random() < 0.8:
            cmd = ['TDIGEST.CREATE', cmd[1], 'COMPRESSION', str(self.rnd.choice([1, 2, 5, 10, 20, 50, 100]))]
        if self.rnd.random() < 0.12:
            cmd = self.mutate(cmd)
        if self.rnd.random() < 0.05:
            cmd[0] = self.rnd.choice([cmd[0].lower(), cmd[0].title()])
        return cmd


def area_random(r, seed, proto, ncmds):
    gen = Gen(seed)
    conn = 'main'
    r.write({'seed': seed, 'proto': proto, 'generator': 'tdigest-randgen-2', 'commands': ncmds})
    if proto == 3:
        r.hello3(conn)
    r.do('FLUSHALL', conn=conn)
    c = r.c(conn)

    def exists(k):
        return c.call('EXISTS', k)[1] == 1  # not recorded: it changes nothing

    cmds = gen.setup()
    for i in range(ncmds):
        cmd = cmds[i] if i < len(cmds) else gen.next(exists)
        reply = r.do(*cmd, conn=conn)
        if cmd[0].upper() == 'DUMP' and isinstance(reply, bytes) and not isinstance(reply, oc.RespError):
            gen.dumps.append(reply)


def area_stream(r):
    """Long streams (50 000 values) with compression 100 and 20: the
    accuracy regime of real use, and thousands of compressions."""
    rnd = random.Random(20261201)
    for key, c, dist in (('u', '100', 'uniform'), ('n', '100', 'normal'), ('x', '20', 'exp')):
        r.section = 'stream-' + key
        r.do('TDIGEST.CREATE', key, 'COMPRESSION', c)
        for _ in range(50):
            if dist == 'uniform':
                vals = [str(rnd.randint(0, 10 ** 6)) for _ in range(1000)]
            elif dist == 'normal':
                vals = ['%.5g' % rnd.gauss(0, 1) for _ in range(1000)]
            else:
                vals = ['%.5g' % rnd.expovariate(1) for _ in range(1000)]
            r.do('TDIGEST.ADD', key, *vals)
        r.do('TDIGEST.INFO', key)
        r.do('TDIGEST.QUANTILE', key, '0', '0.0001', '0.001', '0.01', '0.1', '0.25', '0.5', '0.75', '0.9',
             '0.99', '0.999', '0.9999', '1')
        r.do('TDIGEST.CDF', key, *['%.5g' % v for v in (0, 0.5, 1, 2, 3, 1000, 500000)])
        r.do('TDIGEST.RANK', key, '0', '1', '2', '1000', '500000')
        r.do('TDIGEST.REVRANK', key, '0', '1', '2', '1000', '500000')
        r.do('TDIGEST.BYRANK', key, '0', '1', '10', '25000', '49990', '49999', '50000')
        r.do('TDIGEST.BYREVRANK', key, '0', '1', '10', '25000', '49990', '49999', '50000')
        r.do('TDIGEST.TRIMMED_MEAN', key, '0.1', '0.9')
        r.do('TDIGEST.INFO', key)
        r.do('DUMP', key)
    r.section = 'stream-merge'
    r.do('TDIGEST.MERGE', 'all', '3', 'u', 'n', 'x')
    r.do('TDIGEST.INFO', 'all')
    r.do('TDIGEST.QUANTILE', 'all', '0.001', '0.5', '0.999')
    r.do('DUMP', 'all')


# ---------------------------------------------------------------------------
# Area 3: double formatting (d2string) and parsing (string2d)


def format_values():
    rnd = random.Random(20261202)
    vals = ['0.1', '0.2', '0.3', '1e-7', '1e-6', '1.5e-7', '0.000001', '0.0000015', '1e21', '1e22', '1e17',
            '1e16', '1e18', '123456789012345678', '4611686018427387904', '4611686018427387905',
            '4611686018427388928', '-4611686018427387904', '-4611686018427388928', '9007199254740993',
            '1e15', '1.5', '-1.5', '100', '-100', '1e100', '1e-100', '1.7976931348623157e308',
            '2.2250738585072014e-308', '2.225073858507201e-308', '5e-324', '-5e-324', '-0', '3.141592653589793',
            '2.718281828459045', '1234567.125', '0.000123', '1.23e-5', '12345678.9', '9.999999999999999e22',
            '5e-5', '-1.2345678901234567e-300', '1e300', '0.5', '0.25', '1e2', '12.5e10', '65536.5', '1e-5',
            '1e-4', '0.001', '0.0001', '-0.0001']
    for e in range(-310, 309, 3):
        vals.append(g17(1.2345678901234567 * 10.0 ** e))
    for _ in range(1500):
        vals.append(g17(struct.unpack('<d', struct.pack('<Q', rnd.getrandbits(63)))[0]))
    for _ in range(1000):
        vals.append(g17(rnd.uniform(-1e7, 1e7)))
    for _ in range(500):
        vals.append(g17(rnd.randint(-10 ** 19, 10 ** 19) / 1.0))
    for _ in range(500):
        vals.append('%.*g' % (rnd.randint(1, 17), rnd.uniform(0, 1) * 10 ** rnd.randint(-20, 20)))
    out = []
    for v in vals:
        f = float(v)
        if math.isfinite(f):
            out.append(v)
    return out


def area_format(r):
    """Every value is added alone to a reset digest and read back with
    TDIGEST.MIN on a RESP2 and a RESP3 connection. Records:
    {"input": <ADD argument>, "resp2": <MIN reply>, "resp3": <MIN reply>}."""
    a = r.c('a')
    b = r.c('b')
    b.call('HELLO', '3')
    a.call('TDIGEST.CREATE', 'f')
    for v in format_values() + PARSE_CASES:
        a.call('TDIGEST.RESET', 'f')
        add = a.call('TDIGEST.ADD', 'f', v)[0]
        r2 = a.call('TDIGEST.MIN', 'f')[0]
        r3 = b.call('TDIGEST.MIN', 'f')[0]
        rec = {'input': v, 'add': add.decode(), 'resp2': r2.decode(), 'resp3': r3.decode()}
        r.write(rec)


# ---------------------------------------------------------------------------
# Area 4: memory usage


def area_memusage(r):
    r.section = 'compression'
    for c in (1, 2, 3, 10, 50, 99, 100, 101, 200, 500, 1000, 5000, 12345, 100000):
        r.do('TDIGEST.CREATE', 'k', 'COMPRESSION', str(c))
        r.do('TDIGEST.INFO', 'k')
        r.do('MEMORY', 'USAGE', 'k')
        r.do('TDIGEST.ADD', 'k', *[str(i) for i in range(300)])
        r.do('MEMORY', 'USAGE', 'k', note='independent of the values held')
        r.do('DEL', 'k')
    r.section = 'key-length'
    for n in (1, 2, 8, 10, 16, 17, 24, 40, 44, 45, 100, 300):
        k = 'k' * n
        r.do('BF.ADD', k, 'x')
        r.do('MEMORY', 'USAGE', k)
        r.do('BF.INFO', k, 'SIZE')
        r.do('DEL', k)
        r.do('TDIGEST.CREATE', k)
        r.do('MEMORY', 'USAGE', k)
        r.do('TDIGEST.INFO', k)
        r.do('DEL', k)
    r.section = 'resp3'
    r.hello3('r3')
    r.do('TDIGEST.CREATE', 'k', conn='r3')
    r.do('MEMORY', 'USAGE', 'k', conn='r3')


AREAS = ['transcript', 'random', 'stream', 'format', 'memusage']


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--port', type=int, required=True)
    ap.add_argument('--launch', help='start-redisbloom script: a fresh server per area')
    ap.add_argument('--out', default=HERE)
    ap.add_argument('--sessions', type=int, default=8)
    ap.add_argument('--commands', type=int, default=500)
    ap.add_argument('areas', nargs='*')
    o = ap.parse_args()
    jobs = []
    for name in o.areas or AREAS:
        if name == 'random':
            for i in range(o.sessions):
                seed = 20261130 + 7919 * i
                proto = 2 if i % 2 == 0 else 3
                jobs.append(('random-%03d' % i,
                             lambda r, seed=seed, proto=proto: area_random(r, seed, proto, o.commands)))
        else:
            jobs.append((name, globals()['area_' + name]))
    for name, fn in jobs:
        pid = oc.launch(o.launch, o.port, []) if o.launch else None
        try:
            r = Recorder(o.port, os.path.join(o.out, name + '.jsonl'))
            if not o.launch:
                r.silent('FLUSHALL')
            fn(r)
            r.close()
            print('%s: %d records' % (name, r.count), file=sys.stderr)
        finally:
            if pid:
                oc.stop(pid)
                time.sleep(0.2)


if __name__ == '__main__':
    main()
