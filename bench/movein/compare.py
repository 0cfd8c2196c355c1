# bench/movein/compare.py PORT_A PORT_B: compares every filter of two servers (dbs 0 and 2):
# SCANDUMP bytes (SHA-256), INFO, and TTL (PTTL within 2 s); strings must not have been copied.
import redis, hashlib, sys
a_port, b_port = int(sys.argv[1]), int(sys.argv[2])
bad = 0; n = 0
for db in (0, 2):
    a = redis.Redis(port=a_port, db=db); b = redis.Redis(port=b_port, db=db)
    for typ, p in ((b'MBbloom--', 'BF'), (b'MBbloomCF', 'CF')):
        for k in a.scan_iter(count=1000, _type=typ.decode()):
            n += 1
            def dump(r):
                h = hashlib.sha256(); it = 0
                while True:
                    nx, d = r.execute_command(p + '.SCANDUMP', k, it)
                    if nx == 0: return h.hexdigest()
                    h.update(d or b''); it = nx
            ia, ib = a.execute_command(p + '.INFO', k), b.execute_command(p + '.INFO', k)
            ea, eb = a.execute_command('PTTL', k), b.execute_command('PTTL', k)
            if dump(a) != dump(b) or ia != ib or abs(ea - eb) > 2000 or (ea < 0) != (eb < 0):
                bad += 1; print('DIFF', db, k, ia, ib, ea, eb)
    strings_b = [k for k in b.scan_iter(_type='string')]
    if strings_b: print('strings copied in db', db, strings_b[:3]); bad += 1
print(f'{n} filters compared, {bad} differences')
