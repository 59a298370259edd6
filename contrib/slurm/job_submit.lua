-- slurm-dsl job_submit companion: keeps user jobs at Requeue=0. (contrib/slurm/job_submit.lua)
--
-- Install: copy to the directory of slurm.conf (/etc/slurm/job_submit.lua on Debian), set
-- JobSubmitPlugins=lua in slurm.conf, run `scontrol reconfigure`. See contrib/README.md.
--
-- Contract. Sites running slurm-dsl keep every job at Requeue=0, so that a job showing
-- Requeue=1 is one a slurm-dsl requeue may have left set, which the restore sweeper then
-- clears (docs/contract.md §1, §9). A user who could set Requeue=1 would defeat that. So, for any caller
-- that is not exempt:
--   * submit (sbatch/salloc/srun, `#SBATCH --requeue`, SBATCH_REQUEUE): Requeue=1 becomes
--     Requeue=0 and the user is told in one line; a request that names no Requeue is also
--     pinned to 0, silently, so the rule holds even on a controller left at JobRequeue=1;
--   * modify (`scontrol update JobId=N Requeue=1`, alone or with other fields): the Requeue
--     part becomes 0, the rest of the update goes through, and the user is told.
-- Exempt callers (root, the SlurmUser, the EXEMPT list below) pass through untouched: the
-- first call of a slurm-dsl requeue is root's (or its account's) `update Requeue=1`.
-- "Caller" is the uid making the request (submit_uid / modify_uid), not the job's owner.
--
-- Why clamp rather than reject: a rejected update is an error for the user's script (scontrol
-- exits 1, `set -e` stops it) and it throws away the other fields of the same update (on
-- 22.05.8, `update Requeue=1 TimeLimit=3` returned "Access/permission denied for job N" and
-- left the time limit unchanged). Requeue=0 is site policy, not a user mistake: the job or
-- update goes through with Requeue=0, the user is told, and the clamp is logged in
-- slurmctld.log. Requeue=0 requests and updates that do not name Requeue are never touched.
--
-- What the lua plugin gives us (src/plugins/job_submit/lua/job_submit_lua.c and
-- src/lua/slurm_lua.c in SchedMD/slurm; observed on Debian 12's Slurm 22.05.8):
--   * job_desc.requeue is readable and writable in slurm_job_submit and slurm_job_modify
--     ("requeue" in _get_job_req_field/_set_job_req_field). It is 0, 1, or NO_VAL16 (65534,
--     slurm.NO_VAL16) when the request does not name it: sbatch without --requeue or
--     --no-requeue, and every update that does not name Requeue (hold, release,
--     TimeLimit=...). slurmctld stores any other non-NO_VAL16 value as 1.
--   * job_rec (modify) has no "requeue" field (slurm_lua_job_record_field), and its user_name
--     is nil on 22.05.8: the current flag and the owner's name are not visible here.
--   * slurm.log_user(fmt, ...) on submit reaches the client: sbatch prints
--     "sbatch: <message>" on stderr (22.05.8). In job_modify, 22.05 discards it and logs
--     "error: Use of log.user() in job_modify is not supported. Message discarded" in
--     slurmctld.log; from 23.02 on it is sent back with the update's reply.
--   * There is no operator/administrator check in Lua: the slurm table holds log_*, error,
--     user_msg/log_user, time_str2mins, constants and (newer releases) get_qos_priority and
--     JSON/YAML helpers; slurm.is_operator is nil on 22.05.8. Hence the EXEMPT list.
--   * The plugin stats this file on every call and reloads it when its mtime is newer; a
--     version that fails to load is skipped ("using previous script"; both seen on 22.05.8).
--     At slurmctld start, though, a script that fails to load fails the plugin's init() and
--     so slurmctld: check edits with `luac5.1 -p` (Debian builds the plugin against Lua 5.1).
--   * The chunk must return nothing or slurm.SUCCESS, and define both functions
--     (slurm_lua_loadscript() refuses it otherwise).
-- Written for Lua 5.1 to 5.4: no goto, no integer division or bit operators, no
-- table.unpack/unpack, numbers formatted with %d (valid for integral floats on 5.3+).

-- Accounts exempt besides root (uid 0) and the SlurmUser (the uid slurmctld runs as): the
-- account slurm-dsl runs as, if it is not root, and your operators. A number is a uid; a
-- string is a user name, looked up in /etc/passwd when this file is loaded (list directory
-- (LDAP/SSSD) accounts by uid; a name that is not found is logged as an error in
-- slurmctld.log). Saving this file is enough: the plugin reloads it on the next call.
local EXEMPT = {
    -- "slurm-dsl",
    -- 1234,
}

local PASSWD = "/etc/passwd"
local NO_VAL16 = slurm.NO_VAL16 or 65534

local USER_MSG_SUBMIT = "Requeue=1 is not allowed on this cluster: the job is submitted with Requeue=0"
local USER_MSG_MODIFY = "Requeue=1 is not allowed on this cluster: job %d keeps Requeue=0"

-- uid -> true for the numeric entries, and for the named ones found in /etc/passwd.
local exempt_uids = {}

local function load_exempt()
    local wanted, nwanted = {}, 0
    for _, entry in ipairs(EXEMPT) do
        if type(entry) == "number" then
            exempt_uids[entry] = true
        elseif type(entry) == "string" then
            wanted[entry] = true
            nwanted = nwanted + 1
        else
            slurm.log_error("job_submit.lua: EXEMPT entry of type %s ignored: give a uid or a user name",
                type(entry))
        end
    end
    if nwanted == 0 then
        return
    end
    local f = io.open(PASSWD, "r")
    if f then
        for line in f:lines() do
            local name, uid = line:match("^([^:]+):[^:]*:(%d+):")
            if name and wanted[name] then
                exempt_uids[tonumber(uid)] = true
                wanted[name] = nil
            end
        end
        f:close()
    end
    for name in pairs(wanted) do
        slurm.log_error("job_submit.lua: EXEMPT user %s not found in %s: list it by uid", name, PASSWD)
    end
end

load_exempt()

-- The SlurmUser is the uid slurmctld runs as. Read lazily, at the first request: the
-- script may be loaded before slurmctld drops root for the SlurmUser, requests never are.
local self_uid = nil
local self_uid_read = false

local function slurm_user_uid()
    if not self_uid_read then
        self_uid_read = true
        local f = io.open("/proc/self/status", "r")
        if f then
            for line in f:lines() do
                local euid = line:match("^Uid:%s+%d+%s+(%d+)")
                if euid then
                    self_uid = tonumber(euid)
                    break
                end
            end
            f:close()
        end
        if self_uid == nil then
            slurm.log_error("job_submit.lua: cannot read slurmctld's uid from /proc/self/status: "
                .. "only root and the EXEMPT list are exempt")
        end
    end
    return self_uid
end

local function is_exempt(uid)
    return uid == 0 or exempt_uids[uid] == true or uid == slurm_user_uid()
end

-- True when the request asks for Requeue=1 (any value but 0 and "not given").
local function asks_requeue(value)
    return value ~= nil and value ~= NO_VAL16 and value ~= 0
end

function slurm_job_submit(job_desc, part_list, submit_uid)
    if is_exempt(submit_uid) then
        return slurm.SUCCESS
    end
    local value = job_desc.requeue
    if value == nil then
        return slurm.SUCCESS -- a plugin without the field: nothing to enforce with
    end
    if asks_requeue(value) then
        slurm.log_info("job_submit.lua: uid %d asked Requeue=%d at submit: set to 0", submit_uid, value)
        slurm.log_user(USER_MSG_SUBMIT)
    end
    if value ~= 0 then
        job_desc.requeue = 0
    end
    return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
    if is_exempt(modify_uid) then
        return slurm.SUCCESS
    end
    local value = job_desc.requeue
    if asks_requeue(value) then
        local job_id = job_rec.job_id or 0
        slurm.log_info("job_submit.lua: uid %d asked Requeue=%d for job %d: set to 0", modify_uid, value, job_id)
        slurm.log_user(USER_MSG_MODIFY, job_id)
        job_desc.requeue = 0
    end
    return slurm.SUCCESS
end

return slurm.SUCCESS
