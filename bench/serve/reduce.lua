-- Smyte's discrete-refill token bucket (RL.REDUCE) as a Redis script, the
-- way teams usually build a rate limit on Redis: loaded once with SCRIPT
-- LOAD, called with EVALSHA. The baseline of scripts/bench-serve.
--
--   EVALSHA <sha> 1 <key> <max> <refilltime seconds> [take] [refill]
--
-- The same semantics as the RESP server's RL.REDUCE:
-- - a bucket holds at most `max` tokens; `refill` (default `max`) more at
--   each whole `refilltime` after its refill mark, capped at `max`; the
--   mark moves by whole periods only (a new bucket is full, its mark now);
-- - the reply is the number of tokens available before the request; the
--   bucket then holds max(available - take, 0) (`take`, default 1);
--   `take` 0 reads without writing;
-- - the parameters name the bucket along with the key: the state is one
--   field of the hash at KEYS[1], named "<max>/<refill>/<period ms>",
--   holding "<tokens> <mark ms>";
-- - the hash expires ceil(max / refill) x period after the write: by then
--   the bucket is full, the same as absent.
-- Time is the server's (TIME), in milliseconds.
local max = tonumber(ARGV[1])
local period = tonumber(ARGV[2]) * 1000
local take = tonumber(ARGV[3] or 1)
local refill = tonumber(ARGV[4] or ARGV[1])
if not max or not period or not take or not refill
    or max < 1 or period < 1 or refill < 1 or take < 0 then
  return redis.error_reply('ERR Value is not an integer or out of range')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local field = max .. '/' .. refill .. '/' .. period

local tokens, mark = max, now
local stored = redis.call('HGET', KEYS[1], field)
if stored then
  local sp = string.find(stored, ' ', 1, true)
  tokens = math.min(tonumber(string.sub(stored, 1, sp - 1)), max)
  mark = tonumber(string.sub(stored, sp + 1))
  local elapsed = now - mark
  if elapsed > 0 then
    local refills = math.floor(elapsed / period)
    tokens = math.min(tokens + refills * refill, max)
    mark = mark + refills * period
  end
end

if take > 0 then
  local left = math.max(tokens - take, 0)
  redis.call('HSET', KEYS[1], field, string.format('%d %d', left, mark))
  redis.call('PEXPIRE', KEYS[1], math.ceil(max / refill) * period)
end
return tokens
