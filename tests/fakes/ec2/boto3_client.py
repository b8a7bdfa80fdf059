#!/usr/bin/env python3
"""Drives the fake EC2 with a real AWS client (Debian's python3-boto3) and checks that botocore
accepts every answer: the XML shapes, the error documents, the status codes.

Reads SKY_FAKE_EC2_ENDPOINT, SKY_FAKE_EC2_REGION, SKY_FAKE_EC2_KEY and SKY_FAKE_EC2_SECRET from the
environment, and SKY_FAKE_EC2_INSTANCE_TYPES (the fake's instance-types file) when it has one. Prints what it checked (never the credentials) and "IDS <id>,<id>" last; exits
non-zero on the first failed check.
"""
import datetime
import json
import os
import sys

import boto3
import botocore.config
from botocore.exceptions import ClientError

ENDPOINT = os.environ["SKY_FAKE_EC2_ENDPOINT"]
REGION = os.environ["SKY_FAKE_EC2_REGION"]
KEY = os.environ["SKY_FAKE_EC2_KEY"]
SECRET = os.environ["SKY_FAKE_EC2_SECRET"]

CONFIG = botocore.config.Config(
    retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5, read_timeout=15
)
PUBLIC_KEY = (
    b"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl sky@test"
)


def client(key=KEY, secret=SECRET):
    return boto3.session.Session().client(
        "ec2",
        endpoint_url=ENDPOINT,
        region_name=REGION,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        config=CONFIG,
    )


def check(condition, what):
    if not condition:
        print("FAILED: " + what, flush=True)
        sys.exit(1)
    print("ok: " + what, flush=True)


def error_code(call, **kwargs):
    try:
        call(**kwargs)
    except ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    return None, 200


def check_instance_types(ec2):
    path = os.environ.get("SKY_FAKE_EC2_INSTANCE_TYPES", "")
    if not path:
        print("skipped: describe_instance_types (no instance-types file)", flush=True)
        return
    with open(path, encoding="utf-8") as f:
        expected = json.load(f)
    gpu_types = sorted(name for name, info in expected.items() if "GpuInfo" in info)
    check(len(gpu_types) >= 2, "the instance-types file has GPU types")
    wanted = gpu_types[:2]
    got = ec2.describe_instance_types(InstanceTypes=wanted)["InstanceTypes"]
    check(sorted(t["InstanceType"] for t in got) == wanted, "describe_instance_types by name")
    for info in got:
        want = expected[info["InstanceType"]]
        check(info["VCpuInfo"]["DefaultVCpus"] == want["VCpuInfo"]["DefaultVCpus"]
              and isinstance(info["VCpuInfo"]["DefaultVCpus"], int), "VCpuInfo.DefaultVCpus")
        check(info["MemoryInfo"]["SizeInMiB"] == want["MemoryInfo"]["SizeInMiB"],
              "MemoryInfo.SizeInMiB")
        gpu, want_gpu = info["GpuInfo"]["Gpus"][0], want["GpuInfo"]["Gpus"][0]
        check(gpu["Name"] == want_gpu["Name"] and gpu["Manufacturer"] == want_gpu["Manufacturer"]
              and gpu["Count"] == want_gpu["Count"]
              and gpu["MemoryInfo"]["SizeInMiB"] == want_gpu["MemoryInfo"]["SizeInMiB"],
              "GpuInfo.Gpus: name, manufacturer, count, memory")
        check(info["GpuInfo"]["TotalGpuMemoryInMiB"] == want["GpuInfo"]["TotalGpuMemoryInMiB"],
              "GpuInfo.TotalGpuMemoryInMiB")
        check(info["SupportedUsageClasses"] == want["SupportedUsageClasses"],
              "SupportedUsageClasses")

    # Paging: botocore's paginator follows NextToken with MaxResults (PageSize) per page.
    pages = ec2.get_paginator("describe_instance_types").paginate(PaginationConfig={"PageSize": 5})
    sizes, names = [], []
    for page in pages:
        sizes.append(len(page["InstanceTypes"]))
        names += [t["InstanceType"] for t in page["InstanceTypes"]]
    check(sorted(names) == sorted(expected) and len(names) == len(set(names)),
          "paging returns every instance type once")
    check(max(sizes) <= 5 and len(sizes) == (len(expected) + 4) // 5, "pages of MaxResults")
    whole = ec2.describe_instance_types()
    check(len(whole["InstanceTypes"]) == min(100, len(expected)), "at most 100 per page")
    filtered = ec2.describe_instance_types(
        Filters=[{"Name": "instance-type", "Values": ["p4d.*", "no-such.type"]}])["InstanceTypes"]
    check(sorted(t["InstanceType"] for t in filtered)
          == sorted(n for n in expected if n.startswith("p4d.")), "the instance-type filter")
    code, _ = error_code(ec2.describe_instance_types, InstanceTypes=["no-such.type"])
    check(code == "InvalidInstanceType", "an unknown type is InvalidInstanceType")
    code, _ = error_code(ec2.describe_instance_types, MaxResults=500)
    check(code in ("InvalidParameterValue", "ParamValidation"), "MaxResults over 100 is refused")


def main():
    ec2 = client()

    key = ec2.import_key_pair(KeyName="sky-test", PublicKeyMaterial=PUBLIC_KEY)
    check(key["KeyName"] == "sky-test", "import_key_pair returns the key name")
    check(len(key["KeyFingerprint"].split(":")) == 16, "import_key_pair returns an MD5 fingerprint")
    code, _ = error_code(ec2.import_key_pair, KeyName="sky-test", PublicKeyMaterial=PUBLIC_KEY)
    check(code == "InvalidKeyPair.Duplicate", "a second import_key_pair is a duplicate")
    pairs = ec2.describe_key_pairs(KeyNames=["sky-test"])["KeyPairs"]
    check(len(pairs) == 1 and pairs[0]["KeyPairId"].startswith("key-"), "describe_key_pairs")

    # The C++ side injected one RequestLimitExceeded (503) here: botocore must retry it.
    prices = ec2.describe_spot_price_history(
        InstanceTypes=["g5.xlarge", "g4dn.xlarge"], ProductDescriptions=["Linux/UNIX"]
    )
    history = prices["SpotPriceHistory"]
    check(len(history) == 6, "describe_spot_price_history: 2 types x 3 zones")
    check(isinstance(history[0]["Timestamp"], datetime.datetime), "spot timestamps parse as dates")
    check(all(float(p["SpotPrice"]) > 0 for p in history), "spot prices are positive numbers")
    check(prices["ResponseMetadata"]["RetryAttempts"] == 1, "the throttled call was retried once")

    check_instance_types(ec2)

    images = ec2.describe_images(
        Owners=["amazon"],
        Filters=[
            {"Name": "name", "Values": ["Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) *"]},
            {"Name": "state", "Values": ["available"]},
        ],
    )["Images"]
    check(len(images) == 2, "describe_images finds the Deep Learning AMIs")
    image = max(images, key=lambda i: i["CreationDate"])["ImageId"]

    group = ec2.create_security_group(GroupName="sky-sg", Description="sky test")["GroupId"]
    ec2.authorize_security_group_ingress(
        GroupId=group,
        IpPermissions=[{"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22,
                        "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}],
    )
    groups = ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": ["sky-sg"]}])
    check(groups["SecurityGroups"][0]["IpPermissions"][0]["FromPort"] == 22, "security group rules")

    code, status = error_code(
        ec2.run_instances, ImageId=image, InstanceType="g5.xlarge", MinCount=1, MaxCount=1, DryRun=True
    )
    check(code == "DryRunOperation" and status == 412, "DryRun answers DryRunOperation")

    run = ec2.run_instances(
        ImageId=image,
        InstanceType="g5.xlarge",
        MinCount=2,
        MaxCount=2,
        KeyName="sky-test",
        SecurityGroupIds=[group],
        UserData="#!/bin/sh\necho hi\n",
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "sky:pool", "Value": "p1"}]}],
        InstanceMarketOptions={"MarketType": "spot", "SpotOptions": {"SpotInstanceType": "one-time"}},
    )
    ids = [i["InstanceId"] for i in run["Instances"]]
    check(len(ids) == 2, "run_instances launches MaxCount instances")
    check(all(i["State"]["Name"] == "pending" and i["State"]["Code"] == 0 for i in run["Instances"]),
          "new instances are pending")
    check(isinstance(run["Instances"][0]["LaunchTime"], datetime.datetime), "LaunchTime parses")
    check("PublicIpAddress" not in run["Instances"][0], "no public IP before running")

    described = ec2.describe_instances(InstanceIds=ids)
    instances = [i for r in described["Reservations"] for i in r["Instances"]]
    check(len(instances) == 2, "describe_instances by id")
    check(all(i["State"]["Name"] == "running" for i in instances), "instances become running")
    check(all("PublicIpAddress" in i for i in instances), "running instances have a public IP")
    check(all(i.get("InstanceLifecycle") == "spot" for i in instances), "spot instances say so")
    check(instances[0]["Tags"] == [{"Key": "sky:pool", "Value": "p1"}], "tags round-trip")
    check(instances[0]["SecurityGroups"][0]["GroupId"] == group, "security group attached")

    tagged = ec2.describe_instances(Filters=[{"Name": "tag:sky:pool", "Values": ["p1"]},
                                             {"Name": "instance-state-name", "Values": ["running"]}])
    check(sum(len(r["Instances"]) for r in tagged["Reservations"]) == 2, "filter by tag and state")

    code, _ = error_code(ec2.describe_instances, InstanceIds=["i-0123456789abcdef0"])
    check(code == "InvalidInstanceID.NotFound", "unknown instance id is InvalidInstanceID.NotFound")

    terminated = ec2.terminate_instances(InstanceIds=ids)["TerminatingInstances"]
    check(all(t["CurrentState"]["Name"] == "shutting-down" and t["CurrentState"]["Code"] == 32
              and t["PreviousState"]["Name"] == "running" for t in terminated),
          "terminate_instances: running -> shutting-down")
    after = ec2.describe_instances(InstanceIds=ids)
    check(all(i["State"]["Name"] == "terminated" for r in after["Reservations"] for i in r["Instances"]),
          "instances end terminated")

    code, status = error_code(client(secret="not-the-secret").describe_instances)
    check(code == "SignatureDoesNotMatch" and status == 403, "a wrong secret is rejected")
    code, status = error_code(client(key="AKIDUNKNOWN000000000").describe_instances)
    check(code == "AuthFailure" and status == 401, "an unknown access key is rejected")

    check_sts()

    print("IDS " + ",".join(ids), flush=True)
    return 0


def check_sts():
    """The fake's STS (same endpoint): what sky's volumes mint their nodes' credentials with."""
    sts = boto3.session.Session().client(
        "sts",
        endpoint_url=ENDPOINT,
        region_name=REGION,
        aws_access_key_id=KEY,
        aws_secret_access_key=SECRET,
        config=CONFIG,
    )
    policy = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": "arn:aws:s3:::b/p/*"}]})
    answer = sts.get_federation_token(Name="sky-0123abcd", Policy=policy, DurationSeconds=3600)
    creds = answer["Credentials"]
    check(creds["AccessKeyId"] and creds["SecretAccessKey"] and creds["SessionToken"],
          "get_federation_token returns temporary credentials")
    check(isinstance(creds["Expiration"], datetime.datetime), "the expiration parses as a date")
    check(answer["FederatedUser"]["Arn"].endswith("federated-user/sky-0123abcd"),
          "the federated user is named")
    code, status = error_code(sts.get_federation_token, Name="sky-x", Policy="{not json")
    check(code == "MalformedPolicyDocument" and status == 400, "a malformed policy is refused")
    wrong = boto3.session.Session().client(
        "sts", endpoint_url=ENDPOINT, region_name=REGION, aws_access_key_id=KEY,
        aws_secret_access_key="not-the-secret", config=CONFIG)
    code, status = error_code(wrong.get_federation_token, Name="sky-x")
    check(code == "SignatureDoesNotMatch" and status == 403, "STS rejects a wrong secret")


if __name__ == "__main__":
    sys.exit(main())
