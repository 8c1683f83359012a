_throng() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="throng"
                ;;
            throng,bench)
                cmd="throng__subcmd__bench"
                ;;
            throng,check-config)
                cmd="throng__subcmd__check__subcmd__config"
                ;;
            throng,completions)
                cmd="throng__subcmd__completions"
                ;;
            throng,help)
                cmd="throng__subcmd__help"
                ;;
            throng,icecast)
                cmd="throng__subcmd__icecast"
                ;;
            throng,import-icecast)
                cmd="throng__subcmd__import__subcmd__icecast"
                ;;
            throng,manpage)
                cmd="throng__subcmd__manpage"
                ;;
            throng,report)
                cmd="throng__subcmd__report"
                ;;
            throng,serve)
                cmd="throng__subcmd__serve"
                ;;
            throng__subcmd__bench,agent)
                cmd="throng__subcmd__bench__subcmd__agent"
                ;;
            throng__subcmd__bench,compare)
                cmd="throng__subcmd__bench__subcmd__compare"
                ;;
            throng__subcmd__bench,help)
                cmd="throng__subcmd__bench__subcmd__help"
                ;;
            throng__subcmd__bench,run)
                cmd="throng__subcmd__bench__subcmd__run"
                ;;
            throng__subcmd__bench,test-server)
                cmd="throng__subcmd__bench__subcmd__test__subcmd__server"
                ;;
            throng__subcmd__bench,worker)
                cmd="throng__subcmd__bench__subcmd__worker"
                ;;
            throng__subcmd__bench__subcmd__help,agent)
                cmd="throng__subcmd__bench__subcmd__help__subcmd__agent"
                ;;
            throng__subcmd__bench__subcmd__help,compare)
                cmd="throng__subcmd__bench__subcmd__help__subcmd__compare"
                ;;
            throng__subcmd__bench__subcmd__help,help)
                cmd="throng__subcmd__bench__subcmd__help__subcmd__help"
                ;;
            throng__subcmd__bench__subcmd__help,run)
                cmd="throng__subcmd__bench__subcmd__help__subcmd__run"
                ;;
            throng__subcmd__bench__subcmd__help,test-server)
                cmd="throng__subcmd__bench__subcmd__help__subcmd__test__subcmd__server"
                ;;
            throng__subcmd__bench__subcmd__help,worker)
                cmd="throng__subcmd__bench__subcmd__help__subcmd__worker"
                ;;
            throng__subcmd__help,bench)
                cmd="throng__subcmd__help__subcmd__bench"
                ;;
            throng__subcmd__help,check-config)
                cmd="throng__subcmd__help__subcmd__check__subcmd__config"
                ;;
            throng__subcmd__help,completions)
                cmd="throng__subcmd__help__subcmd__completions"
                ;;
            throng__subcmd__help,help)
                cmd="throng__subcmd__help__subcmd__help"
                ;;
            throng__subcmd__help,icecast)
                cmd="throng__subcmd__help__subcmd__icecast"
                ;;
            throng__subcmd__help,import-icecast)
                cmd="throng__subcmd__help__subcmd__import__subcmd__icecast"
                ;;
            throng__subcmd__help,manpage)
                cmd="throng__subcmd__help__subcmd__manpage"
                ;;
            throng__subcmd__help,report)
                cmd="throng__subcmd__help__subcmd__report"
                ;;
            throng__subcmd__help,serve)
                cmd="throng__subcmd__help__subcmd__serve"
                ;;
            throng__subcmd__help__subcmd__bench,agent)
                cmd="throng__subcmd__help__subcmd__bench__subcmd__agent"
                ;;
            throng__subcmd__help__subcmd__bench,compare)
                cmd="throng__subcmd__help__subcmd__bench__subcmd__compare"
                ;;
            throng__subcmd__help__subcmd__bench,run)
                cmd="throng__subcmd__help__subcmd__bench__subcmd__run"
                ;;
            throng__subcmd__help__subcmd__bench,test-server)
                cmd="throng__subcmd__help__subcmd__bench__subcmd__test__subcmd__server"
                ;;
            throng__subcmd__help__subcmd__bench,worker)
                cmd="throng__subcmd__help__subcmd__bench__subcmd__worker"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        throng)
            opts="-h -V --help --version serve check-config bench import-icecast report icecast manpage completions help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__bench)
            opts="-h --help run compare test-server agent worker help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__bench__subcmd__agent)
            opts="-h --listen --once --stdio --max-workers --bind-range --name --agent-cert --agent-key --no-self-test --worker-exe --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-workers)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bind-range)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --agent-cert)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --agent-key)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --worker-exe)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__bench__subcmd__compare)
            opts="-h --out --listeners --hold --only --set --junit --no-progress --worker-exe --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --out)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --listeners)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hold)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --only)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --set)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --junit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --worker-exe)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__bench__subcmd__help)
            opts="run compare test-server agent worker help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__bench__subcmd__help__subcmd__agent)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__bench__subcmd__help__subcmd__compare)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__bench__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__bench__subcmd__help__subcmd__run)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__bench__subcmd__help__subcmd__test__subcmd__server)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__bench__subcmd__help__subcmd__worker)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__bench__subcmd__run)
            opts="-n -h --set --mode --listeners --ramp --hold --profile --bitrate-kbps --min-rate-pct --window --max-gap --stage --churn-rate --session-min --session-max --storm-at --stalled-fraction --icy --reconnect-after --connect-timeout --hls-no-blocking-reload --workers --max-per-worker --bind-range --insecure --ca --threshold --no-default-thresholds --source --source-url --source-user --source-password --source-method --source-speed --pid --pid-file --pid-name --metrics-url --out --name --no-progress --metrics-listen --metrics-linger --out-timeline --junit --events --trigger-url --admin-user --admin-password --changes --change-interval --max-latency --max-rss-per-subscriber --whep --whep-threads --latency-source --latency-icy --latency-bursts --agents --agent-wait --agent-ca --worker-exe --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --set)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mode)
                    COMPREPLY=($(compgen -W "icy hls events whep" -- "${cur}"))
                    return 0
                    ;;
                --listeners)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -n)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ramp)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hold)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --profile)
                    COMPREPLY=($(compgen -W "ramp-hold churn storm stalled" -- "${cur}"))
                    return 0
                    ;;
                --bitrate-kbps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-rate-pct)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --window)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-gap)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stage)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --churn-rate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --session-min)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --session-max)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --storm-at)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stalled-fraction)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --reconnect-after)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --connect-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --workers)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-per-worker)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bind-range)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ca)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --threshold)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --source)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --source-url)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --source-user)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --source-password)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --source-method)
                    COMPREPLY=($(compgen -W "put source" -- "${cur}"))
                    return 0
                    ;;
                --source-speed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pid)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pid-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pid-name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics-url)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --out)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics-listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics-linger)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --out-timeline)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --junit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --trigger-url)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --admin-user)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --admin-password)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --changes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --change-interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-latency)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-rss-per-subscriber)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --whep-threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --latency-source)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --latency-icy)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --latency-bursts)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --agents)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --agent-wait)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --agent-ca)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --worker-exe)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__bench__subcmd__test__subcmd__server)
            opts="-h --listen --bitrate-kbps --interval-ms --burst-bytes --stop-after-secs --metaint --icy-status --garbage-after-secs --hls --hls-segment-secs --hls-window --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bitrate-kbps)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --interval-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --burst-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stop-after-secs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metaint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --garbage-after-secs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hls-segment-secs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hls-window)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__bench__subcmd__worker)
            opts="-h --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__check__subcmd__config)
            opts="-c -h --config --icecast-config --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -c)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --icecast-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__completions)
            opts="-h --help bash elvish fish powershell zsh"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__help)
            opts="serve check-config bench import-icecast report icecast manpage completions help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__help__subcmd__bench)
            opts="run compare test-server agent worker"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__help__subcmd__bench__subcmd__agent)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__help__subcmd__bench__subcmd__compare)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__help__subcmd__bench__subcmd__run)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__help__subcmd__bench__subcmd__test__subcmd__server)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__help__subcmd__bench__subcmd__worker)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__help__subcmd__check__subcmd__config)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__help__subcmd__completions)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__help__subcmd__icecast)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__help__subcmd__import__subcmd__icecast)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__help__subcmd__manpage)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__help__subcmd__report)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__help__subcmd__serve)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__icecast)
            opts="-c -b -v -h --state-dir --log --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                -c)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --state-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__import__subcmd__icecast)
            opts="-h --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__manpage)
            opts="-h --out --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --out)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__report)
            opts="-c -h --from --to --mount --group --csv --service --category --config --icecast-config --database --state-dir --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --from)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --to)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mount)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --group)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --service)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --category)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -c)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --icecast-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --database)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --state-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        throng__subcmd__serve)
            opts="-c -h --config --icecast-config --listen --source-password --admin-password --public-url --cluster-secret --ledger-database --webrtc-public-address --tls-listen --tls-cert --tls-key --state-dir --log --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -c)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --icecast-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --source-password)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --admin-password)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --public-url)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cluster-secret)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ledger-database)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webrtc-public-address)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tls-listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tls-cert)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tls-key)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --state-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _throng -o nosort -o bashdefault -o default throng
else
    complete -F _throng -o bashdefault -o default throng
fi
