-- worker_finish: a job's final event and its task's removal from the in-flight list in one
-- step (workers/main.c): a worker killed between the two would leave a finished task there.
-- KEYS[1] gantry:events  KEYS[2] gantry:inflight:<worker>
-- ARGV[1] the stream's MAXLEN  ARGV[2] the event  ARGV[3] the task
-- Result: always 1 (an event is added even when the task was no longer in the list).
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'event', ARGV[2])
redis.call('LREM', KEYS[2], 1, ARGV[3])
return 1
