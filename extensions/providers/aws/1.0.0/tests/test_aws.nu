use std/assert
use ../nulib/aws.nu *

assert equal (aws-instance-type-for 2 1) "t3.micro"
assert equal (aws-instance-type-for 2 6) "m6i.large"
assert equal (aws-instance-type-for 3 4) "m6i.xlarge"
assert error { aws-instance-type-for 96 768 }

assert equal (aws-missing-env {AWS_ACCESS_KEY_ID: "AKIAEXAMPLE"}) ["AWS_SECRET_ACCESS_KEY", "AWS_REGION"]
assert equal (aws-missing-env {AWS_ACCESS_KEY_ID: "a", AWS_SECRET_ACCESS_KEY: "b", AWS_REGION: "us-east-1"}) []

let bad = (aws-validate {name: "", ami: "ubuntu", instance_type: "p5.48xlarge", volume_gb: 4})
assert equal ($bad | length) 4
assert equal $bad.0 "name is required"
assert str contains $bad.1 "ami 'ubuntu'"
assert str contains $bad.2 "instance_type 'p5.48xlarge'"
assert str contains $bad.3 "volume_gb 4"

let tags = (aws-tag-specifications "web-1" {env: "dev"})
assert equal ($tags | get ResourceType) ["instance", "volume"]
assert equal $tags.0.Tags [{Key: "Name", Value: "web-1"}, {Key: "env", Value: "dev"}]

let server = {name: "web-1", ami: "ami-0123456789abcdef0", instance_type: "t3.medium", volume_gb: 40, security_groups: ["sg-1", "sg-2"], subnet_id: "subnet-9"}
let plan = (aws-create-server $server --check --region "us-east-2")
assert equal $plan.dry_run true
let argv = $plan.argv
assert equal ($argv | first 5) ["aws", "ec2", "run-instances", "--region", "us-east-2"]
let at = {|flag| $argv | get (($argv | enumerate | where item == $flag | first | get index) + 1) }
assert equal (do $at "--instance-type") "t3.medium"
assert equal (do $at "--subnet-id") "subnet-9"
assert equal (do $at "--block-device-mappings" | from json | get 0.Ebs.VolumeSize) 40
assert equal ($argv | last 3) ["--security-group-ids", "sg-1", "sg-2"]
assert equal ("--key-name" in $argv) false
assert error { aws-create-server {name: "x", ami: "nope"} --check }

let del = (aws-delete-server ["i-0abc", "i-0def"] --check)
assert equal $del.argv ["aws", "ec2", "terminate-instances", "--region", "eu-west-1", "--instance-ids", "i-0abc", "i-0def"]
