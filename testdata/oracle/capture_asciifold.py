#!/usr/bin/env python3
"""Capture how RedisBloom 8.8.0 (Redis 8.0-m01) compares keywords, names and
types: with C's strcasecmp/tolower/toupper, ASCII letters only. Each case
spells a real keyword with a Unicode letter that Go's strings.EqualFold,
ToLower or ToUpper folds onto an ASCII one:

    U+017F LATIN SMALL LETTER LONG S   'ſ'  EqualFold to s, ToUpper to S
    U+212A KELVIN SIGN                 'K'  EqualFold to k, ToLower to k
    U+0130 CAPITAL I WITH DOT ABOVE    'İ'  ToLower to i
    U+0131 SMALL DOTLESS I             'ı'  ToUpper to I

and then looks at what the command did (BF.INFO, DBSIZE, CONFIG GET ...).
RESP2, one connection. Self-contained but for the raw client of
../../../shared/oracle-tools/resp.py (found beside this repository).

    python3 capture_asciifold.py PORT asciifold.jsonl

PORT must be a fresh server you started (it is FLUSHALLed).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'shared', 'oracle-tools'))
sys.path.insert(0, '/work/shared/oracle-tools')
import resp  # noqa: E402

S = '\u017f'   # ſ
K = '\u212a'   # Kelvin sign
IU = '\u0130'  # İ
IL = '\u0131'  # ı


def main():
    port, out = int(sys.argv[1]), sys.argv[2]
    c = resp.Conn(port)
    recs = []

    def do(section, *args, note=None, volatile=False, volatile_positions=None):
        raw, v = c.call(*args)
        recs.append(resp.record(list(args), raw, section=section, note=note, volatile=volatile,
                                volatile_positions=volatile_positions))
        return v

    do('setup', 'FLUSHALL')

    sec = 'bf'
    do(sec, 'BF.RESERVE', 'b1', '0.01', '100', 'EXPAN' + S + 'ION', '4')
    do(sec, 'BF.INFO', 'b1')
    do(sec, 'BF.INFO', 'b1', 'EXPANSION')
    do(sec, 'BF.RESERVE', 'b2', '0.01', '100', 'NON' + S + 'CALING')
    do(sec, 'BF.INFO', 'b2')
    do(sec, 'BF.RESERVE', 'b3', '0.01', '100', 'EXPANSION', '4')
    do(sec, 'BF.INFO', 'b3', 'EXPANSION')
    do(sec, 'BF.INFO', 'b3', 'CAPAC' + IU + 'TY')
    do(sec, 'BF.INFO', 'b3', 'EXPANS' + IU + 'ON')
    do(sec, 'BF.INFO', 'b3', 'capacity')

    # BF.INSERT and CF.INSERT tell options apart by their first letters
    # (the third for NOCREATE/NONSCALING): look-alikes later in the word
    # change nothing, at the start they make an unknown argument.
    sec = 'insert'
    do(sec, 'BF.INSERT', 'i1', 'CAPAC' + IU + 'TY', '50', 'NON' + S + 'CALING', 'ITEM' + S, 'a')
    do(sec, 'BF.INFO', 'i1')
    do(sec, 'BF.INSERT', 'i2', K + 'CAPACITY', '50', 'ITEMS', 'a')
    do(sec, 'BF.INSERT', 'i2', 'NO' + S + 'REATE', 'ITEMS', 'a')
    do(sec, 'CF.INSERT', 'i3', 'CAPAC' + IU + 'TY', '50', 'ITEM' + S, 'a')
    do(sec, 'CF.INFO', 'i3')
    do(sec, 'CF.INSERT', 'i4', IL + 'TEMS', 'a')

    sec = 'cf'
    do(sec, 'CF.RESERVE', 'c1', '100', 'BUCKET' + S + 'IZE', '4')
    do(sec, 'CF.INFO', 'c1')
    do(sec, 'CF.RESERVE', 'c2', '100', 'EXPAN' + S + 'ION', '4')
    do(sec, 'CF.INFO', 'c2')
    do(sec, 'CF.RESERVE', 'c3', '100', 'MAXITERATION' + S, '5')
    do(sec, 'CF.INFO', 'c3')
    do(sec, 'CF.RESERVE', 'c4', '100', 'bucketsize', '4', 'maxiterations', '5', 'expansion', '4')
    do(sec, 'CF.INFO', 'c4')

    sec = 'cms'
    do(sec, 'CMS.INITBYDIM', 'ma', '10', '2')
    do(sec, 'CMS.INITBYDIM', 'mb', '10', '2')
    do(sec, 'CMS.INITBYDIM', 'mc', '10', '2')
    do(sec, 'CMS.INCRBY', 'ma', 'x', '1')
    do(sec, 'CMS.INCRBY', 'mb', 'x', '10')
    do(sec, 'CMS.MERGE', 'mc', '2', 'ma', 'mb', 'WEIGHT' + S, '1', '2')
    do(sec, 'CMS.QUERY', 'mc', 'x')
    do(sec, 'CMS.MERGE', 'mc', '2', 'ma', 'mb', 'weights', '1', '2')
    do(sec, 'CMS.QUERY', 'mc', 'x')

    sec = 'topk'
    do(sec, 'TOPK.RESERVE', 'tk', '3', '8', '7', '1')
    do(sec, 'TOPK.ADD', 'tk', 'a')
    do(sec, 'TOPK.LIST', 'tk', 'W' + IL + 'THCOUNT')
    do(sec, 'TOPK.LIST', 'tk', 'W' + IU + 'THCOUNT')
    do(sec, 'TOPK.LIST', 'tk', 'withcount')

    sec = 'tdigest'
    do(sec, 'TDIGEST.CREATE', 'td', 'COMPRE' + S + S + 'ION', '100')
    do(sec, 'TDIGEST.CREATE', 'td', 'COMPRESSION', '100')
    do(sec, 'TDIGEST.CREATE', 'td2', 'compression', '200')
    do(sec, 'TDIGEST.MERGE', 'td3', '2', 'td', 'td2', 'COMPRE' + S + S + 'ION', '50')
    do(sec, 'TDIGEST.MERGE', 'td3', '2', 'td', 'td2', 'OVERR' + IU + 'DE')
    do(sec, 'TDIGEST.MERGE', 'td3', '2', 'td', 'td2', 'OVERR' + IL + 'DE')
    do(sec, 'EXISTS', 'td3')

    sec = 'keys'
    do(sec, 'MEMORY', 'USAGE', 'b3', S + 'AMPLES', '0')
    do(sec, 'MEMORY', 'USAGE', 'b3', 'samples', '0')
    payload = do(sec, 'DUMP', 'b3', volatile=True,
                 note="the payload of the RESTOREs below (the RDB version is the 8.0-m01 core's)")
    do(sec, 'RESTORE', 'r1', '0', payload, 'AB' + S + 'TTL')
    do(sec, 'RESTORE', 'r1', '0', payload, IL + 'DLETIME', '1')
    do(sec, 'RESTORE', 'r1', '0', payload, 'ABSTTL')
    do(sec, 'EXISTS', 'r1')
    do(sec, 'DBSIZE')
    do(sec, 'FLUSHALL', 'A' + S + 'YNC')
    do(sec, 'FLUSHALL', S + 'YNC')
    do(sec, 'FLUSHDB', S + 'YNC')
    do(sec, 'DBSIZE')

    sec = 'scan'
    do(sec, 'FLUSHALL', 'sync')
    do(sec, 'CMS.INITBYDIM', 'cm', '10', '2')
    do(sec, 'SCAN', '0', 'TYPE', 'cms' + K + '-type')
    do(sec, 'SCAN', '0', 'TYPE', 'tdis-type')
    do(sec, 'SCAN', '0', 'TYPE', 'l' + IU + 'st')
    do(sec, 'SCAN', '0', 'TYPE', 'CMSK-TYPE')

    sec = 'command'
    do(sec, 'COMMAND', 'INFO', 'bf.' + IU + 'nfo')
    do(sec, 'COMMAND', 'INFO', 'bf.' + K + 'ey')
    do(sec, 'COMMAND', 'DOCS', 'cf.' + IU + 'nfo')
    do(sec, 'COMMAND', IU + 'NFO', 'bf.add')
    do(sec, 'COMMAND', 'GET' + K + 'EYS', 'bf.add', 'k', 'x')
    do(sec, 'COMMAND', 'GETKEYS', 'OBJECT', 'ENCOD' + IU + 'NG', 'k')
    do(sec, 'COMMAND', 'GETKEYS', 'object', 'encoding', 'k')
    do(sec, 'COMMAND', 'LIST', 'FILTERBY', 'ACLCAT', S + 'low')
    do(sec, 'COMMAND', 'LIST', 'FILTERBY', 'ACLCAT', 'cuc' + K + 'oo')
    do(sec, 'COMMAND', 'LIST', 'FILTERBY', 'PATTERN', 'bf.' + IU + 'nfo')
    do(sec, 'COMMAND', 'LIST', 'FILTERBY', 'PATTERN', 'BF.INFO')
    do(sec, 'OBJECT', 'ENCOD' + IU + 'NG', 'cm')
    do(sec, 'ACL', 'DRYRUN', 'default', 'CLIENT', K + 'ILL', 'ID', '1')
    do(sec, 'ACL', 'DRYRUN', 'default', 'OBJECT', 'ENCOD' + IU + 'NG', 'cm')

    sec = 'client'
    do(sec, 'CLIENT', K + 'ILL', 'ID', '999999')
    do(sec, 'CLIENT', 'L' + IU + 'ST', 'ID', '999999')
    do(sec, 'CLIENT', 'KILL', IU + 'D', '999999')
    do(sec, 'CLIENT', 'KILL', 'MAXAGE', '1000000', 'S' + K + 'IPME', 'yes')
    do(sec, 'CLIENT', 'KILL', 'MAXAGE', '1000000', 'SKIPME', 'yes')
    do(sec, 'CLIENT', 'KILL', 'TYPE', 'repl' + IU + 'ca')
    do(sec, 'CLIENT', 'KILL', 'TYPE', 'replica')
    do(sec, 'CLIENT', 'LIST', 'TYPE', 'repl' + IU + 'ca')
    do(sec, 'CLIENT', 'LIST', 'TYPE', 'REPLICA')
    do(sec, 'CLIENT', 'UNBLOCK', '999999', 'T' + IU + 'MEOUT')
    do(sec, 'CLIENT', 'UNBLOCK', '999999', 'timeout')
    do(sec, 'CLIENT', 'PAUSE', '0', 'WR' + IU + 'TE')
    do(sec, 'CLIENT', 'SETINFO', 'L' + IL + 'B-NAME', 'x')
    do(sec, 'CLIENT', 'SETINFO', 'lib-name', 'x')
    do(sec, 'HELLO', '2', S + 'ETNAME', 'n1')
    do(sec, 'CLIENT', 'GETNAME')

    sec = 'config'
    do(sec, 'CONFIG', 'GET', 'maxmemory-pol' + IU + 'cy')
    do(sec, 'CONFIG', 'GET', 'cf-max-' + IU + 'terations')
    do(sec, 'CONFIG', 'GET', 'latency-trac' + K + 'ing')
    do(sec, 'CONFIG', 'SET', 'maxmemory-pol' + IU + 'cy', 'noeviction')
    do(sec, 'CONFIG', 'SET', 'maxmemory-policy', 'noev' + IU + 'ction')
    do(sec, 'CONFIG', 'SET', S + 'lowlog-max-len', '100')
    do(sec, 'CONFIG', 'GET', 'slowlog-max-len')
    do(sec, 'CONFIG', 'SET', 'maxmemory', '1' + K + 'b')
    do(sec, 'CONFIG', 'SET', 'maxmemory', '1' + K)
    do(sec, 'CONFIG', 'GET', 'maxmemory')
    do(sec, 'CONFIG', 'SET', 'cf-max-' + IU + 'terations', '50')
    do(sec, 'CONFIG', 'GET', 'cf-max-iterations')
    do(sec, 'CONFIG', 'SET', 'bf-expan' + S + 'ion-factor', '4')
    do(sec, 'CONFIG', 'GET', 'bf-expansion-factor')

    sec = 'info'
    do(sec, 'INFO', 'cl' + IU + 'ents')
    do(sec, 'INFO', K + 'eyspace')

    sec = 'persist'
    do(sec, 'BGSAVE', S + 'CHEDULE')

    # What SLOWLOG shows of arguments: HELLO's AUTH password is hidden only
    # when HELLO reached it (parsing stops at the first unknown option), a
    # CONFIG SET value only for a sensitive parameter Redis found.
    sec = 'slowlog'
    do(sec, 'CONFIG', 'SET', 'slowlog-log-slower-than', '0')
    do(sec, 'SLOWLOG', 'RESET')
    do(sec, 'HELLO', '2', S + 'ETNAME', 'AUTH', 'default', 'pw')
    do(sec, 'HELLO', '2', 'SETNAME', 'n2', 'AUTH', 'default', 'pw', volatile=True, note='the reply holds the client id')
    do(sec, 'CONFIG', 'SET', 'requirepa' + S + S, 'secret')
    do(sec, 'CONFIG', 'SET', 'slowlog-log-slower-than', '10000000')
    do(sec, 'SLOWLOG', 'GET', volatile=True, volatile_positions=[0, 1, 2, 4],
       note='entries: [id, unix time, microseconds, argv, client addr, client name]')
    do(sec, 'CONFIG', 'SET', 'slowlog-log-slower-than', '10000')

    with open(out, 'w') as f:
        for r in recs:
            f.write(resp.dumps(r) + '\n')
    print('%d records' % len(recs))


if __name__ == '__main__':
    main()
