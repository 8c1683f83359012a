# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_throng_global_optspecs
    string join \n h/help V/version
end

function __fish_throng_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_throng_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_throng_using_subcommand
    set -l cmd (__fish_throng_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c throng -n "__fish_throng_needs_command" -s h -l help -d 'Print help'
complete -c throng -n "__fish_throng_needs_command" -s V -l version -d 'Print version'
complete -c throng -n "__fish_throng_needs_command" -f -a "serve" -d 'Run the streaming server (Icecast-compatible)'
complete -c throng -n "__fish_throng_needs_command" -f -a "check-config" -d 'Check a configuration as `serve` would (parse, validate, every file and directory it names); prints each problem with its key, exits 1 on any, 0 with "configuration OK"'
complete -c throng -n "__fish_throng_needs_command" -f -a "bench" -d 'Run the load generator against any Icecast-compatible server'
complete -c throng -n "__fish_throng_needs_command" -f -a "import-icecast" -d 'Print the Throng TOML configuration equivalent to an Icecast icecast.xml (what is not carried over is listed in comments at the top, and on stderr)'
complete -c throng -n "__fish_throng_needs_command" -f -a "report" -d 'Print an audience report from the ledger\'s database (no server needs to run): listening, tracks, plays, sessions, soundexchange or ppl'
complete -c throng -n "__fish_throng_needs_command" -f -a "icecast" -d 'Icecast\'s command line (`-c FILE`, `-b`, `-v`): run an icecast.xml as Icecast would; the same as invoking the binary as `icecast` or `icecast2` (a symlink)'
complete -c throng -n "__fish_throng_needs_command" -f -a "manpage" -d 'Write the man pages: throng.1 and one page per subcommand (throng-serve.1, ...)'
complete -c throng -n "__fish_throng_needs_command" -f -a "completions" -d 'Print the completion script of a shell on standard output'
complete -c throng -n "__fish_throng_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c throng -n "__fish_throng_using_subcommand serve" -s c -l config -d 'TOML configuration file (see throng.example.toml); without it, embedded defaults with the demo mount' -r -F
complete -c throng -n "__fish_throng_using_subcommand serve" -l icecast-config -d 'Icecast 2.4 configuration file (icecast.xml) to run on instead of a TOML file; what Throng does not support is printed as warnings at start-up' -r -F
complete -c throng -n "__fish_throng_using_subcommand serve" -l listen -d 'Listen address (replaces every `listen` of the file), e.g. 0.0.0.0:8000' -r
complete -c throng -n "__fish_throng_using_subcommand serve" -l source-password -d 'Source password (user `source`), overriding the file' -r
complete -c throng -n "__fish_throng_using_subcommand serve" -l admin-password -d 'Admin password (user `admin`), overriding the file' -r
complete -c throng -n "__fish_throng_using_subcommand serve" -l public-url -d 'This server\'s base URL as listeners reach it (`[cluster] public-url`, where an origin redirects them), overriding the file; e.g. http://203.0.113.7:8000' -r
complete -c throng -n "__fish_throng_using_subcommand serve" -l cluster-secret -d 'The cluster secret (`[cluster] secret`), overriding the file; a `[[relay]]` with `username = "edge"` and no password uses it' -r
complete -c throng -n "__fish_throng_using_subcommand serve" -l ledger-database -d 'The audience ledger\'s database (`[ledger] database`: sqlite:///path.db, postgres://user:password@host/db or off), overriding the file' -r
complete -c throng -n "__fish_throng_using_subcommand serve" -l webrtc-public-address -d 'The address WebRTC viewers are told to send to (`[webrtc] public-address`, the ICE candidate), overriding the file; e.g. a Kubernetes pod\'s or node\'s IP' -r
complete -c throng -n "__fish_throng_using_subcommand serve" -l tls-listen -d 'HTTPS listen address (replaces `[tls] listen` of the file), e.g. 0.0.0.0:8443; needs --tls-cert and --tls-key (or certificates in the file)' -r
complete -c throng -n "__fish_throng_using_subcommand serve" -l tls-cert -d 'PEM certificate chain for HTTPS, leaf first (e.g. Let\'s Encrypt\'s fullchain.pem); replaces the file\'s `[[tls.certificate]]`' -r -F
complete -c throng -n "__fish_throng_using_subcommand serve" -l tls-key -d 'PEM private key of --tls-cert (PKCS#8, RSA or EC; e.g. Let\'s Encrypt\'s privkey.pem)' -r -F
complete -c throng -n "__fish_throng_using_subcommand serve" -l state-dir -d 'Directory of the state file keeping generated passwords (passwords.toml); overrides `[paths] state-dir`; default $XDG_STATE_HOME/throng or ~/.local/state/throng' -r -F
complete -c throng -n "__fish_throng_using_subcommand serve" -l log -d 'Log filter (tracing\'s EnvFilter syntax), e.g. `debug` or `throng_server=debug`; overrides `[logging] level` (default `info`)' -r
complete -c throng -n "__fish_throng_using_subcommand serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c throng -n "__fish_throng_using_subcommand check-config" -s c -l config -d 'TOML configuration file; without it (and without --icecast-config), the embedded defaults' -r -F
complete -c throng -n "__fish_throng_using_subcommand check-config" -l icecast-config -d 'Icecast 2.4 configuration file (icecast.xml)' -r -F
complete -c throng -n "__fish_throng_using_subcommand check-config" -s h -l help -d 'Print help'
complete -c throng -n "__fish_throng_using_subcommand bench; and not __fish_seen_subcommand_from run compare test-server agent worker help" -s h -l help -d 'Print help'
complete -c throng -n "__fish_throng_using_subcommand bench; and not __fish_seen_subcommand_from run compare test-server agent worker help" -f -a "run" -d 'Load-test one or more listener URLs (listeners are spread round-robin over the URLs)'
complete -c throng -n "__fish_throng_using_subcommand bench; and not __fish_seen_subcommand_from run compare test-server agent worker help" -f -a "compare" -d 'Run the same profile against several servers, one after the other, from a scenario file'
complete -c throng -n "__fish_throng_using_subcommand bench; and not __fish_seen_subcommand_from run compare test-server agent worker help" -f -a "test-server" -d 'A minimal fixed-rate streaming server (one write per listener per interval), used to calibrate the bench and by its tests'
complete -c throng -n "__fish_throng_using_subcommand bench; and not __fish_seen_subcommand_from run compare test-server agent worker help" -f -a "agent" -d 'Run a bench agent: wait for a controller (`bench run --agents`) and run its share of the load on this host'
complete -c throng -n "__fish_throng_using_subcommand bench; and not __fish_seen_subcommand_from run compare test-server agent worker help" -f -a "worker" -d 'Internal: one worker process of a run, of any mode (reads its mode and spec as JSON from stdin, writes one JSON line per tick to stdout)'
complete -c throng -n "__fish_throng_using_subcommand bench; and not __fish_seen_subcommand_from run compare test-server agent worker help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l set -d 'Set a scenario parameter, `NAME=VALUE` (repeatable): `${NAME}` in the file' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l mode -d 'What the simulated clients are: ICY listeners, HLS players, event-stream subscribers or WebRTC viewers. Default: HLS when the URLs end `.m3u8`, events with `--events`, WHEP with `--whep`, else ICY; choices that disagree are refused' -r -f -a "icy\t'ICY/HTTP stream listeners (Icecast\'s protocol): the default'
hls\t'HLS players: playlist polling, segment fetches, a player\'s buffer'
events\t'Server-sent-event subscribers of `/api/v1/events`, timing title changes'
whep\t'WebRTC viewers set up over WHEP'"
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -s n -l listeners -d 'Number of simulated listeners (listeners, total over all URLs and workers)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l ramp -d 'New listeners started per second during the ramp (listeners/s, total)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l hold -d 'How long to hold once every listener was started (e.g. `30s`)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l profile -d 'Load profile' -r -f -a "ramp-hold\t'Ramp up to the listener count, hold, close'
churn\t'Ramp-and-hold, while `churn_rate` listeners per second leave and rejoin at once'
storm\t'Ramp-and-hold; at `storm_at` into the hold every listener drops and reconnects at once'
stalled\t'Ramp-and-hold where `stalled_fraction` of listeners send their request and never read'"
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l bitrate-kbps -d 'The stream\'s bitrate in kbit/s, if you know it. Never needed to judge: every listener\'s media time is read from its frames. A bitrate that disagrees with the stream\'s (its frames, its `icy-br`) is reported; for a stream of an unknown format it turns bytes into media time' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l min-rate-pct -d 'A listener is starved (`starved: rate`) when the media time it receives over `window` is less than this share of the wall time (percent of real time)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l window -d 'Sliding window for the bitrate check (whole seconds, 1 to 15)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l max-gap -d 'A gap between arrivals longer than this (a player\'s buffer) makes a listener starved (`starved: gap`)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l stage -d 'Stages instead of `-n`, `--ramp` and `--hold`, as k6\'s `--stage`: `DURATION:TARGET`, repeatable (`--stage 30s:2000 --stage 60s:2000 --stage 10s:0`); each ramps linearly from the previous target (0 at the start) to its own over its duration' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l churn-rate -d 'Churn profile: listeners that leave and rejoin per second (listeners/s, total; default 1 % of the listeners)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l session-min -d 'Sessions of a random length: each listener leaves after a time drawn evenly between `--session-min` and `--session-max` once it streams, and rejoins at once (any profile; both must be set)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l session-max -d 'Longest session (see `--session-min`)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l storm-at -d 'Storm profile: when, after the hold starts, every listener reconnects (default: half the hold)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l stalled-fraction -d 'Stalled profile: share of listeners that never read (0 to 1; default 0.1)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l reconnect-after -d 'Reconnect a listener that failed after this delay (default: a failed listener stays down)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l connect-timeout -d 'Connect plus response-head timeout' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l workers -d 'Worker processes (0: one in-process event-loop thread; default: one per `max_per_worker` listeners, in-process when one suffices)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l max-per-worker -d 'Most sockets one worker process opens (sockets; the per-process fd limit is 20,000)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l bind-range -d 'Local source addresses bound round-robin for loopback targets, `FIRST-LAST` (IPv4), or `none`' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l ca -d 'For `https://` URLs: PEM file of the certificate authorities to trust (default: the web PKI roots)' -r -F
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l threshold -d 'A threshold, k6-style (repeatable): `ttfb.p99<500ms`, `starved.rate<0.1%`, `failed.count<1`, `mouth-to-ear{group:webrtc}.p99<300ms`. The defaults (no listener starved, corrupt or failed, all up at the end) give way to one on the same metric' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l source -d 'Push this file (MP3, AAC, Ogg) as a live source to `--source-url` (default: the first listener URL) before the listeners start' -r -F
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l source-url -d 'Mount URL for `--source`' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l source-user -d 'Source user' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l source-password -d 'Source password (no default: required with `--source`, unless the `THRONG_SOURCE_PASSWORD` environment variable or the source URL has one)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l source-method -d 'Source request method' -r -f -a "put\t'`PUT /mount HTTP/1.1` with `Expect: 100-continue` (ffmpeg, libshout ≥ 2.4 HTTP mode)'
source\t'`SOURCE /mount HTTP/1.0` (legacy libshout)'"
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l source-speed -d '`--source` play speed: 1 is real time, 0.5 pushes at half the file\'s pace (a source falling behind)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l pid -d 'Sample this local server process (and its children) every second' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l pid-file -d 'Sample the local process whose id is in this pidfile (e.g. `throng serve --pid-file`)' -r -F
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l pid-name -d 'Sample the one local process whose command line contains PATTERN (like `pgrep -f`; an error when none or several unrelated processes match)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l metrics-url -d 'Sample a Prometheus `/metrics` URL every second (for a remote server)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l out -d 'Output directory for `report.json`, `report.html` and the plots (and, for WHEP runs, `report-whep.json`). Default: `bench-results`, or `bench-results/<name>` for a scenario (its `out`)' -r -F
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l name -d 'Name of the run (used in reports; default: `run`, or the scenario\'s)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l metrics-listen -d 'Serve the bench\'s live series at `http://ADDR/metrics` (Prometheus text format) while the run goes' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l metrics-linger -d 'Keep `/metrics` up this long after the run, for a last scrape (e.g. `5s`)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l out-timeline -d 'Write the per-second timeline as NDJSON to FILE while the run goes' -r -F
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l junit -d 'Write a JUnit XML report (one test case per threshold) to FILE' -r -F
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l trigger-url -d 'With `--events`: the mount whose title the run changes, `http://host:port/mount` (an origin, for subscribers on its relay edges). Default: the `?mount=` of the first URL, on its server' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l admin-user -d 'With `--events`: admin user for the title changes' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l admin-password -d 'With `--events`: admin password for the title changes (or the `THRONG_ADMIN_PASSWORD` environment variable)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l changes -d 'With `--events`: title changes to make once every subscriber is ready (1 to 64; a scenario\'s events group makes one every interval while it lasts unless `changes` says)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l change-interval -d 'With `--events`: time between two title changes' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l max-latency -d 'With `--events`: the verdict needs the p99 delivery latency within this' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l max-rss-per-subscriber -d 'With `--events`: the verdict needs the server\'s RSS growth per subscriber within this (bytes; checked when the server is sampled with `--pid`, `--pid-file` or `--pid-name`: the first URL\'s server, holding its round-robin share of the subscribers, and only from 500 subscribers on it: below that, page-size noise; the figure is reported all the same)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l whep-threads -d 'With `--whep`: threads per worker process driving its viewers (each with its own connector thread for the POSTs)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l latency-source -d 'Push a latency probe as the live source of this Ogg/Opus mount (`http://host:port/mount`, with `--source-user`, `--source-password`, `--source-method`): one 20 ms Opus packet per Ogg page, each stamped with its send time, so viewers of the mount\'s WHEP endpoint (`--whep`) and `--latency-icy` ICY listeners of the mount report mouth-to-ear latency. Without `--whep` the run\'s listeners load the mount and the ICY probes measure. With `--latency-bursts` the mount is an MP3 one fed with tone bursts instead' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l latency-icy -d 'With `--latency-source`: ICY listeners of the probe mount measuring the same latency (not with `--latency-bursts`)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l latency-bursts -d 'With `--latency-source` naming an MP3 mount: push this MP3 file of tone bursts (a burst at the start of every whole second of its media, silence between; looped) in real time instead of stamped Opus. The server transcodes the mount to Opus for its WHEP viewers, who hear each burst begin as a large Opus packet after small ones; the delay from the source writing the burst\'s MP3 frame to that packet\'s arrival is the latency (an upper bound: it includes the MP3 encoder\'s delay). ICY latency is not measured then' -r -F
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l agents -d 'Run over bench agents on other hosts: `HOST:PORT,...` of `throng bench agent`, or `ssh://[USER@]HOST[:PORT][/PATH-TO-THRONG]` to start one there over SSH' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l agent-wait -d 'With `--agents`: how long to keep trying to reach the agents (e.g. `120s`)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l agent-ca -d 'With `--agents`: the CA (PEM) that signed the agents\' certificates: the link is TLS' -r -F
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l worker-exe -d 'Program to run as a worker process (default: this executable, as `<exe> bench worker`)' -r -F
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l icy -d 'Ask for ICY metadata (`Icy-MetaData: 1`) and check the block framing of every listener'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l hls-no-blocking-reload -d 'HLS players: never use blocking playlist reload (`_HLS_msn`), even when the playlist advertises `CAN-BLOCK-RELOAD=YES`; reload on the RFC 8216 timer instead (a player without low-latency support)'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l insecure -d 'For `https://` URLs: accept any server certificate (self-signed test servers)'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l no-default-thresholds -d 'Judge only the thresholds given (drop the defaults)'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l no-progress -d 'No live progress display (neither the bar nor the plain lines)'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l events -d 'The URLs are event streams (`http://host:port/api/v1/events`): load them with SSE subscribers and measure the delivery of title changes instead of audio'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -l whep -d 'The URLs are WHEP endpoints (`http://host:port/whep/<mount>`): load them with WebRTC viewers (str0m clients) instead of HTTP listeners. Viewers are spread over `--workers` processes (default: one per CPU); against a loopback server each viewer has its own 127.100.x.y address on its thread\'s one shared socket, else its own socket over the `--bind-range` source addresses'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from compare" -l out -d 'Output directory (default: the scenario\'s `out`, else `bench-results/<scenario name>`)' -r -F
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from compare" -l listeners -d 'Override the scenario\'s listener count (listeners)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from compare" -l hold -d 'Override the scenario\'s hold' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from compare" -l only -d 'Only run the servers with these names (repeatable)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from compare" -l set -d 'Set a scenario parameter, `NAME=VALUE` (repeatable): `${NAME}` in the file' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from compare" -l junit -d 'Write a JUnit XML report (one test suite per server) to FILE' -r -F
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from compare" -l worker-exe -d 'Program to run as a worker process (default: this executable)' -r -F
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from compare" -l no-progress -d 'No live progress display'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from compare" -s h -l help -d 'Print help'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from test-server" -l listen -d 'Address to listen on (port 0 picks one; the bound address is printed on stdout)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from test-server" -l bitrate-kbps -d 'Stream bitrate (kbit/s)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from test-server" -l interval-ms -d 'Time between two writes to a listener (ms)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from test-server" -l burst-bytes -d 'Bytes sent right after the response head (bytes)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from test-server" -l stop-after-secs -d 'Stop sending audio this long after start (seconds), keeping connections open' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from test-server" -l metaint -d 'ICY metadata interval offered to listeners asking for it (bytes; 0 = none)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from test-server" -l garbage-after-secs -d 'Send random bytes instead of MP3 frames from this long after start (seconds): the same byte rate, ICY blocks still framed; HLS segments starting after it carry garbage frames' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from test-server" -l hls-segment-secs -d 'HLS segment length (seconds)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from test-server" -l hls-window -d 'HLS segments listed in the playlist (segments)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from test-server" -l icy-status -d 'Answer `ICY 200 OK` instead of `HTTP/1.0 200 OK`'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from test-server" -l hls -d 'Serve a live HLS stream too, over HTTP/1.1 keep-alive: `/hls/live/index.m3u8` (the last `--hls-window` segments, listed once complete) and `/hls/live/<seq>.mp3` (packed MP3: an ID3 timestamp tag, then the segment\'s frames)'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from test-server" -s h -l help -d 'Print help'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from agent" -l listen -d 'Address to listen on for a controller' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from agent" -l max-workers -d 'Most worker processes per group (default: 2 per core)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from agent" -l bind-range -d 'This host\'s source addresses, `FIRST-LAST`: they replace every group\'s bind range here' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from agent" -l name -d 'The agent\'s name in the controller\'s report (default: the host name)' -r
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from agent" -l agent-cert -d 'TLS: this agent\'s certificate chain (PEM)' -r -F
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from agent" -l agent-key -d 'TLS: this agent\'s private key (PEM)' -r -F
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from agent" -l worker-exe -d 'Program to run as a worker process (default: this executable)' -r -F
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from agent" -l once -d 'Serve one run, then exit (a Kubernetes Job\'s pod)'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from agent" -l stdio -d 'Serve one controller on standard input and output (started over SSH by `bench run --agents ssh://...`); no token: SSH authenticated the controller'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from agent" -l no-self-test -d 'Skip the CPU self-test (the capacity is then files and ports only)'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from agent" -s h -l help -d 'Print help'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from worker" -s h -l help -d 'Print help'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "run" -d 'Load-test one or more listener URLs (listeners are spread round-robin over the URLs)'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "compare" -d 'Run the same profile against several servers, one after the other, from a scenario file'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "test-server" -d 'A minimal fixed-rate streaming server (one write per listener per interval), used to calibrate the bench and by its tests'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "agent" -d 'Run a bench agent: wait for a controller (`bench run --agents`) and run its share of the load on this host'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "worker" -d 'Internal: one worker process of a run, of any mode (reads its mode and spec as JSON from stdin, writes one JSON line per tick to stdout)'
complete -c throng -n "__fish_throng_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c throng -n "__fish_throng_using_subcommand import-icecast" -s h -l help -d 'Print help'
complete -c throng -n "__fish_throng_using_subcommand report" -l from -d 'Start: Unix seconds or RFC 3339 (default: 7 days before --to)' -r
complete -c throng -n "__fish_throng_using_subcommand report" -l to -d 'End: Unix seconds or RFC 3339 (default: now)' -r
complete -c throng -n "__fish_throng_using_subcommand report" -l mount -d 'Only this mount' -r
complete -c throng -n "__fish_throng_using_subcommand report" -l group -d 'Grouping of `listening`: hour, day, country, path or agent (default day)' -r
complete -c throng -n "__fish_throng_using_subcommand report" -l service -d 'NAME_OF_SERVICE of `soundexchange` (default `[ledger] service`, else `[station] name`, else `server-id`)' -r
complete -c throng -n "__fish_throng_using_subcommand report" -l category -d 'TRANSMISSION_CATEGORY of `soundexchange` (default `[ledger] category`)' -r
complete -c throng -n "__fish_throng_using_subcommand report" -s c -l config -d 'TOML configuration file whose `[ledger] database` is read' -r -F
complete -c throng -n "__fish_throng_using_subcommand report" -l icecast-config -d 'Icecast configuration file (icecast.xml) instead of a TOML file' -r -F
complete -c throng -n "__fish_throng_using_subcommand report" -l database -d 'The database, over the configuration\'s (`sqlite:///path` or `postgres://…`)' -r
complete -c throng -n "__fish_throng_using_subcommand report" -l state-dir -d 'State directory of the default SQLite ledger (as `throng serve --state-dir`)' -r -F
complete -c throng -n "__fish_throng_using_subcommand report" -l csv -d '`listening` and `tracks` as CSV rather than JSON'
complete -c throng -n "__fish_throng_using_subcommand report" -s h -l help -d 'Print help'
complete -c throng -n "__fish_throng_using_subcommand icecast" -s c -d 'The Icecast configuration file (icecast.xml) to run; reloaded on SIGHUP' -r -F
complete -c throng -n "__fish_throng_using_subcommand icecast" -l state-dir -d 'Directory of the generated passwords and the default SQLite audience ledger (as `throng serve --state-dir`; `throng report` reads the ledger there too)' -r -F
complete -c throng -n "__fish_throng_using_subcommand icecast" -l log -d 'Log filter (as `throng serve --log`), over the file\'s `<loglevel>`' -r
complete -c throng -n "__fish_throng_using_subcommand icecast" -s b -d 'Run in the background: detach from the console once the configuration is read (the starting process exits 0)'
complete -c throng -n "__fish_throng_using_subcommand icecast" -s v -d 'Print the version and exit'
complete -c throng -n "__fish_throng_using_subcommand icecast" -s h -l help -d 'Print help'
complete -c throng -n "__fish_throng_using_subcommand manpage" -l out -d 'Directory to write the pages to (created if missing)' -r -F
complete -c throng -n "__fish_throng_using_subcommand manpage" -s h -l help -d 'Print help'
complete -c throng -n "__fish_throng_using_subcommand completions" -s h -l help -d 'Print help'
complete -c throng -n "__fish_throng_using_subcommand help; and not __fish_seen_subcommand_from serve check-config bench import-icecast report icecast manpage completions help" -f -a "serve" -d 'Run the streaming server (Icecast-compatible)'
complete -c throng -n "__fish_throng_using_subcommand help; and not __fish_seen_subcommand_from serve check-config bench import-icecast report icecast manpage completions help" -f -a "check-config" -d 'Check a configuration as `serve` would (parse, validate, every file and directory it names); prints each problem with its key, exits 1 on any, 0 with "configuration OK"'
complete -c throng -n "__fish_throng_using_subcommand help; and not __fish_seen_subcommand_from serve check-config bench import-icecast report icecast manpage completions help" -f -a "bench" -d 'Run the load generator against any Icecast-compatible server'
complete -c throng -n "__fish_throng_using_subcommand help; and not __fish_seen_subcommand_from serve check-config bench import-icecast report icecast manpage completions help" -f -a "import-icecast" -d 'Print the Throng TOML configuration equivalent to an Icecast icecast.xml (what is not carried over is listed in comments at the top, and on stderr)'
complete -c throng -n "__fish_throng_using_subcommand help; and not __fish_seen_subcommand_from serve check-config bench import-icecast report icecast manpage completions help" -f -a "report" -d 'Print an audience report from the ledger\'s database (no server needs to run): listening, tracks, plays, sessions, soundexchange or ppl'
complete -c throng -n "__fish_throng_using_subcommand help; and not __fish_seen_subcommand_from serve check-config bench import-icecast report icecast manpage completions help" -f -a "icecast" -d 'Icecast\'s command line (`-c FILE`, `-b`, `-v`): run an icecast.xml as Icecast would; the same as invoking the binary as `icecast` or `icecast2` (a symlink)'
complete -c throng -n "__fish_throng_using_subcommand help; and not __fish_seen_subcommand_from serve check-config bench import-icecast report icecast manpage completions help" -f -a "manpage" -d 'Write the man pages: throng.1 and one page per subcommand (throng-serve.1, ...)'
complete -c throng -n "__fish_throng_using_subcommand help; and not __fish_seen_subcommand_from serve check-config bench import-icecast report icecast manpage completions help" -f -a "completions" -d 'Print the completion script of a shell on standard output'
complete -c throng -n "__fish_throng_using_subcommand help; and not __fish_seen_subcommand_from serve check-config bench import-icecast report icecast manpage completions help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c throng -n "__fish_throng_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "run" -d 'Load-test one or more listener URLs (listeners are spread round-robin over the URLs)'
complete -c throng -n "__fish_throng_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "compare" -d 'Run the same profile against several servers, one after the other, from a scenario file'
complete -c throng -n "__fish_throng_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "test-server" -d 'A minimal fixed-rate streaming server (one write per listener per interval), used to calibrate the bench and by its tests'
complete -c throng -n "__fish_throng_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "agent" -d 'Run a bench agent: wait for a controller (`bench run --agents`) and run its share of the load on this host'
complete -c throng -n "__fish_throng_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "worker" -d 'Internal: one worker process of a run, of any mode (reads its mode and spec as JSON from stdin, writes one JSON line per tick to stdout)'
