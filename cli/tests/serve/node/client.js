// The serve tests' Node client: ioredis against `memcache-ratelimit serve`
// on the port given as the first argument. Prints one JSON object.
const Redis = require('ioredis');

(async () => {
  const port = Number(process.argv[2]);
  const key = process.argv[3];
  const redis = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1, retryStrategy: () => null });
  const out = {};
  out.ping = await redis.ping();
  out.reduce = [];
  for (let i = 0; i < 3; i++) {
    out.reduce.push(await redis.call('RL.REDUCE', key, 2, 60));
  }
  const pipeline = redis.pipeline();
  for (let i = 0; i < 5; i++) {
    pipeline.call('RL.PREDUCE', key + ':p', 5, 60000);
  }
  out.pipelined = (await pipeline.exec()).map(([error, value]) => (error ? String(error) : value));
  out.throttle = await redis.call('CL.THROTTLE', key, 15, 30, 60, 1);
  out.window = await redis.call('RL.WINDOW', key, 2, 60);
  try {
    await redis.call('RL.REDUCE', key, 'x', 60);
  } catch (error) {
    out.error = error.message;
  }
  await redis.quit();
  console.log(JSON.stringify(out));
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
