-- bench/serve/reduce.lua with the bucket in a plain string instead of a
-- hash field: GET, then SET ... PX (two calls instead of three). The key
-- alone names the bucket, so a caller that uses one key with several
-- parameter sets must put them in the key. The same replies otherwise;
-- the faster of the two baselines of scripts/bench-serve.
--
--   EVALSHA <sha> 1 <key> <max> <refilltime seconds> [take] [refill]
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

local tokens, mark = max, now
local stored = redis.call('GET', KEYS[1])
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
  redis.call('SET', KEYS[1], string.format('%d %d', left, mark),
             'PX', math.ceil(max / refill) * period)
end
return tokens
