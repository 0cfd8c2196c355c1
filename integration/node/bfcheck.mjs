// Drives bfserver with node-redis (default RESP3): BF and CF commands
// through the client's own API. Exits non-zero on any mismatch.
import { createClient } from 'redis';

const url = process.argv[2];
const client = createClient({ url });
client.on('error', (e) => { console.error('client error', e); process.exit(2); });
await client.connect();

function check(cond, what, got) {
  if (!cond) { console.error(`FAIL ${what}: ${JSON.stringify(got)}`); process.exit(1); }
}

check(await client.ping() === 'PONG', 'PING');
check(await client.bf.reserve('nb', 0.01, 1000) === 'OK', 'BF.RESERVE');
const added = await client.bf.mAdd('nb', ['a', 'b', 'a']);
check(JSON.stringify(added) === '[true,true,false]', 'BF.MADD', added);
check(await client.bf.exists('nb', 'a') === true, 'BF.EXISTS a');
check(await client.bf.exists('nb', 'zz') === false, 'BF.EXISTS zz');
const info = await client.bf.info('nb');
check(info['Capacity'] === 1000 && info['Number of items inserted'] === 2, 'BF.INFO', info);
check(await client.cf.add('nc', 'x') === true, 'CF.ADD');
check(await client.cf.count('nc', 'x') === 1, 'CF.COUNT');
check(await client.cf.del('nc', 'x') === true, 'CF.DEL');
const cinfo = await client.cf.info('nc');
check(cinfo['Number of items deleted'] === 1, 'CF.INFO', cinfo);
check(await client.type('nb') === 'MBbloom--', 'TYPE');
await client.quit();
console.log('ok');
