-- wrk's requests for scripts/bench-web: GET / with the client named in an
-- x-api-key header, `client-1` to `client-<KEYS>` (environment variable,
-- default 1), drawn at random for each request from a seed of each
-- thread's own (SEED plus the thread's number).
local keys = tonumber(os.getenv("KEYS") or "1")
local seed = tonumber(os.getenv("SEED") or "42")
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("id", threads)
end

function init(args)
  math.randomseed(seed + (id or 0))
end

function request()
  return wrk.format("GET", "/", { ["x-api-key"] = "client-" .. math.random(keys) })
end
