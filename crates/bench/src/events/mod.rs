//! Now-playing event-stream subscribers (`throng bench run --events URL`): SSE clients of
//! `/api/v1/events` that time each title change from trigger to receipt ([`subscriber`]).

pub mod subscriber;
