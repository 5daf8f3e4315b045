# AWS provider: EC2 instance selection and AWS CLI invocations.
# Commands that would call AWS return the argv they run; --check stops before running it.

const REQUIRED_ENV = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"]

# Current-generation general purpose types, smallest first.
export def aws-instance-types []: nothing -> table {
    [
        [name vcpus memory_gb];
        ["t3.micro" 2 1]
        ["t3.small" 2 2]
        ["t3.medium" 2 4]
        ["m6i.large" 2 8]
        ["m6i.xlarge" 4 16]
        ["m6i.2xlarge" 8 32]
        ["m6i.4xlarge" 16 64]
    ]
}

# The smallest instance type with at least `vcpus` vCPUs and `memory_gb` GiB.
export def aws-instance-type-for [vcpus: int, memory_gb: int]: nothing -> string {
    let fits = (aws-instance-types | where vcpus >= $vcpus and memory_gb >= $memory_gb)
    if ($fits | is-empty) {
        error make {msg: $"no instance type has ($vcpus) vCPUs and ($memory_gb) GiB; the largest is m6i.4xlarge"}
    }
    $fits | first | get name
}

# Names of required environment variables missing or empty in `vars` (pass $env).
export def aws-missing-env [vars: record]: nothing -> list<string> {
    $REQUIRED_ENV | where {|name| ($vars | get -o $name | default "" | str trim | is-empty) }
}

# Problems with a server definition; empty when it is valid.
export def aws-validate [server: record]: nothing -> list<string> {
    mut errors = []
    if ($server.name? | default "" | is-empty) { $errors = ($errors | append "name is required") }
    if not (($server.ami? | default "") =~ '^ami-[0-9a-f]{8,17}$') {
        $errors = ($errors | append $"ami '($server.ami? | default "")' must look like ami-0123456789abcdef0")
    }
    let type = ($server.instance_type? | default "t3.small")
    if $type not-in (aws-instance-types | get name) {
        $errors = ($errors | append $"instance_type '($type)' is not supported; use one of (aws-instance-types | get name | str join ', ')")
    }
    let size = ($server.volume_gb? | default 20)
    if $size < 8 or $size > 16384 { $errors = ($errors | append $"volume_gb ($size) must be between 8 and 16384") }
    $errors
}

# TagSpecifications for run-instances: instance and volume tags, Name first.
export def aws-tag-specifications [name: string, tags: record]: nothing -> list<record> {
    let pairs = ([{Key: "Name", Value: $name}] | append ($tags | transpose Key Value))
    [{ResourceType: "instance", Tags: $pairs} {ResourceType: "volume", Tags: $pairs}]
}

# The `aws ec2 run-instances` argv for a server.
export def aws-run-instances-args [server: record, --region: string = "eu-west-1"]: nothing -> list<string> {
    let errors = (aws-validate $server)
    if ($errors | is-not-empty) { error make {msg: ($errors | str join "; ")} }
    let mapping = [{DeviceName: "/dev/xvda", Ebs: {VolumeSize: ($server.volume_gb? | default 20), VolumeType: "gp3", DeleteOnTermination: true}}]
    mut argv = [
        aws ec2 run-instances "--region" $region
        "--image-id" $server.ami
        "--instance-type" ($server.instance_type? | default "t3.small")
        "--count" "1"
        "--block-device-mappings" ($mapping | to json -r)
        "--tag-specifications" (aws-tag-specifications $server.name ($server.tags? | default {}) | to json -r)
        "--metadata-options" "HttpTokens=required,HttpEndpoint=enabled"
    ]
    if ($server.key_name? | is-not-empty) { $argv = ($argv | append ["--key-name" $server.key_name]) }
    if ($server.subnet_id? | is-not-empty) { $argv = ($argv | append ["--subnet-id" $server.subnet_id]) }
    if ($server.security_groups? | is-not-empty) {
        $argv = ($argv | append "--security-group-ids" | append $server.security_groups)
    }
    if ($server.user_data_file? | is-not-empty) { $argv = ($argv | append ["--user-data" $"file://($server.user_data_file)"]) }
    $argv
}

# Launch an instance; with --check, return the command without running it.
export def aws-create-server [server: record, --check, --region: string = "eu-west-1"]: nothing -> record {
    let argv = (aws-run-instances-args $server --region $region)
    if $check { return {argv: $argv, dry_run: true} }
    let missing = (aws-missing-env $env)
    if ($missing | is-not-empty) { error make {msg: $"set ($missing | str join ', ') to use AWS"} }
    let out = (run-external ...$argv | from json)
    {argv: $argv, instance_id: $out.Instances.0.InstanceId, dry_run: false}
}

# Terminate instances; with --check, return the command.
export def aws-delete-server [instance_ids: list<string>, --check, --region: string = "eu-west-1"]: nothing -> record {
    let argv = ([aws ec2 terminate-instances "--region" $region "--instance-ids"] | append $instance_ids)
    if $check { return {argv: $argv, dry_run: true} }
    run-external ...$argv | ignore
    {argv: $argv, dry_run: false}
}
