#!/usr/bin/env python3
"""Capture how RedisBloom 8.8.0 (Redis 8.0-m01) reads numbers in arguments (and
writes EXPIRETIME/PEXPIRETIME):
string2ll and string2d at their edges (overflow, underflow, hexadecimal,
infinity, spaces, signs, leading zeros, digit separators) through every
command family that takes one, RESP2. Self-contained but for the raw client
of ../../../shared/oracle-tools/resp.py (found beside this repository).

    python3 capture_numbers.py PORT numbers.jsonl

PORT must be a fresh server you started (it is FLUSHALLed).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'shared', 'oracle-tools'))
sys.path.insert(0, '/work/shared/oracle-tools')
import resp  # noqa: E402

DOUBLES = ['1e400', '-1e400', '1e-400', '0x1p-3', '0X1P-3', '0x.8', 'inf', '-inf', 'INFINITY', 'nan', '-nan',
           ' 0.1', '0.1 ', '+0.1', '.1', '1.', '1_0', '0.1e', '1e+2', '1E-2', '0x', '', '00.1',
           '0.' + '0' * 300 + '1', '1' + '0' * 300, '4.9e-324', '2.4e-324', '1.7976931348623157e308', '1.8e308']
INTS = ['9223372036854775807', '9223372036854775808', '-9223372036854775808', '-9223372036854775809',
        '007', '+7', '-0', ' 7', '7 ', '7.0', '1e3', '', '0x10', '4294967296', '18446744073709551616']


def main():
    port, out = int(sys.argv[1]), sys.argv[2]
    c = resp.Conn(port)
    recs = []

    def do(section, *args):
        raw, _ = c.call(*args)
        recs.append(resp.record(list(args), raw, section=section))

    do('setup', 'FLUSHALL')
    for i, d in enumerate(DOUBLES):
        do('bf.reserve error rate', 'BF.RESERVE', 'bf%d' % i, d, '100')
        do('bf.insert error rate', 'BF.INSERT', 'bi%d' % i, 'ERROR', d, 'ITEMS', 'a')
        do('cms.initbyprob error', 'CMS.INITBYPROB', 'cms%d' % i, d, '0.01')
        do('cms.initbyprob probability', 'CMS.INITBYPROB', 'cmp%d' % i, '0.01', d)
        do('topk.reserve decay', 'TOPK.RESERVE', 'tk%d' % i, '5', '10', '3', d)
    for i, n in enumerate(INTS):
        do('bf.reserve capacity', 'BF.RESERVE', 'bc%d' % i, '0.01', n)
        do('cf.reserve capacity', 'CF.RESERVE', 'cc%d' % i, n)
        do('cms.initbydim width', 'CMS.INITBYDIM', 'cw%d' % i, n, '3')
        do('cms.incrby increment', 'CMS.INCRBY', 'cw0', 'x', n)
        do('topk.reserve k', 'TOPK.RESERVE', 'tr%d' % i, n)
        do('expire seconds', 'EXPIRE', 'bf1', n)
        do('select db', 'SELECT', n)
        do('config set module int', 'CONFIG', 'SET', 'bf-initial-size', n)
        do('config set module int', 'CONFIG', 'SET', 'bf-initial-size', '100')
    for d in DOUBLES:
        do('config set module double', 'CONFIG', 'SET', 'bf-error-rate', d)
        do('config set module double', 'CONFIG', 'SET', 'bf-error-rate', '0.01')
    do('select back', 'SELECT', '0')
    do('expiretime', 'EXPIRETIME', 'nokey')
    do('expiretime', 'PEXPIRETIME', 'nokey')
    do('expiretime', 'SET', 'et', 'v')
    do('expiretime', 'EXPIRETIME', 'et')
    do('expiretime', 'PEXPIRETIME', 'et')
    do('expiretime', 'PEXPIREAT', 'et', '4000000000999')
    do('expiretime', 'EXPIRETIME', 'et')
    do('expiretime', 'PEXPIRETIME', 'et')
    do('expiretime', 'BF.ADD', 'ebf', 'x')
    do('expiretime', 'EXPIREAT', 'ebf', '4000000001')
    do('expiretime', 'EXPIRETIME', 'ebf')
    do('expiretime', 'PEXPIRETIME', 'ebf')
    do('expiretime', 'EXPIRETIME', 'ebf', 'extra')
    with open(out, 'w') as f:
        for r in recs:
            f.write(resp.dumps(r) + '\n')
    print('%d records' % len(recs))


if __name__ == '__main__':
    main()
