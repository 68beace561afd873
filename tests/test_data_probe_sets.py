"""The linear-probe datasets (nclab.data.probe_sets) on small fakes of each official layout that the tests write:
split files, .mat files (scipy.io.savemat), a few 8x8 images; labels, class order, paths, and the errors."""

import numpy as np
import pytest
import scipy.io
from PIL import Image

from nclab.data import CorruptDatasetError, DatasetNotFoundError, open_images
from nclab.data.probe_sets import (
    read_caltech101,
    read_dtd,
    read_fgvc_aircraft,
    read_flowers102,
    read_food101,
    read_oxford_pets,
    read_stanford_cars,
    read_sun397,
)


def img(path, value=0, fmt=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((8, 8, 3), value, np.uint8)).save(path, format=fmt or "JPEG")


def rel(ds, folder):
    return [ds.path(i).relative_to(folder).as_posix() for i in range(len(ds))]


# ------------------------------------------------------------------------------------------ Pets
def test_oxford_pets(tmp_path):
    base = tmp_path / "oxford-iiit-pet"
    rows = {"trainval": ["Abyssinian_1 1 1 1", "yorkshire_terrier_7 37 2 25"], "test": ["Abyssinian_9 1 1 1"]}
    for split, lines in rows.items():
        (base / "annotations").mkdir(parents=True, exist_ok=True)
        (base / "annotations" / f"{split}.txt").write_text("\n".join(lines) + "\n")
        for line in lines:
            img(base / "images" / f"{line.split()[0]}.jpg")
    ds = open_images("oxford-pets", "trainval", root=tmp_path)
    assert ds.targets.tolist() == [0, 36] and ds.K == 37
    assert ds.classes[0] == "Abyssinian" and ds.classes[36] == "yorkshire_terrier"
    assert rel(ds, base) == ["images/Abyssinian_1.jpg", "images/yorkshire_terrier_7.jpg"]
    assert tuple(ds[1][0].shape) == (3, 8, 8)
    assert len(read_oxford_pets(base, "test")) == 1
    (base / "annotations" / "test.txt").write_text("Abyssinian_9 38 1 1\n")
    with pytest.raises(CorruptDatasetError, match=r"test\.txt: line 1"):
        read_oxford_pets(base, "test")


# ------------------------------------------------------------------------------------------ Flowers
def test_flowers102_mat_files(tmp_path):
    base = tmp_path / "flowers-102"
    base.mkdir()
    labels = np.array([1, 1, 2, 102, 2, 1])  # image_00001 .. image_00006
    scipy.io.savemat(base / "imagelabels.mat", {"labels": labels.reshape(1, -1)})
    scipy.io.savemat(
        base / "setid.mat", {"trnid": np.array([[1, 3]]), "valid": np.array([[2, 6]]), "tstid": np.array([[4, 5]])}
    )
    for i in range(1, 7):
        img(base / "jpg" / f"image_{i:05d}.jpg")
    tr = open_images("flowers102", "train", root=tmp_path)
    assert tr.targets.tolist() == [0, 1] and rel(tr, base) == ["jpg/image_00001.jpg", "jpg/image_00003.jpg"]
    te = read_flowers102(base, "test")
    assert te.targets.tolist() == [101, 1] and te.K == 102 and te.classes[101] == "102"
    assert read_flowers102(base, "val").targets.tolist() == [0, 0]
    scipy.io.savemat(
        base / "setid.mat", {"trnid": np.array([[1, 9]]), "valid": np.array([[2]]), "tstid": np.array([[4]])}
    )
    with pytest.raises(CorruptDatasetError, match=r"image ids outside 1\.\.6"):
        read_flowers102(base, "train")
    scipy.io.savemat(base / "setid.mat", {"train": np.array([[1]])})
    with pytest.raises(CorruptDatasetError, match="expected a variable 'trnid'"):
        read_flowers102(base, "train")


# ------------------------------------------------------------------------------------------ Aircraft
def test_fgvc_aircraft(tmp_path):
    data = tmp_path / "fgvc-aircraft-2013b" / "data"
    data.mkdir(parents=True)
    (data / "variants.txt").write_text("707-320\nA300B4\nBoeing 717\n")
    (data / "families.txt").write_text("Boeing 707\nA300\nBoeing 717\n")
    (data / "images_variant_train.txt").write_text("1025794 Boeing 717\n0034309 707-320\n")
    (data / "images_family_train.txt").write_text("1025794 Boeing 717\n0034309 Boeing 707\n")
    for name in ("1025794", "0034309"):
        img(data / "images" / f"{name}.jpg")
    ds = open_images("fgvc-aircraft", "train", root=tmp_path)
    assert ds.classes == ["707-320", "A300B4", "Boeing 717"] and ds.targets.tolist() == [2, 0]
    assert rel(ds, data) == ["images/1025794.jpg", "images/0034309.jpg"]
    fam = read_fgvc_aircraft(data.parent, "train", annotation_level="family")
    assert fam.targets.tolist() == [2, 0]
    (data / "images_variant_val.txt").write_text("1025794 Boeing 747\n")
    with pytest.raises(CorruptDatasetError, match=r"'Boeing 747' is not in variants\.txt"):
        read_fgvc_aircraft(data.parent, "val")
    with pytest.raises(DatasetNotFoundError, match=r"images_variant_test\.txt"):
        read_fgvc_aircraft(data.parent, "test")


# ------------------------------------------------------------------------------------------ Cars
def _annos(rows):
    arr = np.zeros(len(rows), dtype=[("bbox_x1", "O"), ("fname", "O"), ("class", "O")])
    for i, (f, c) in enumerate(rows):
        arr[i] = (1, f, c)
    return {"annotations": arr}


def test_stanford_cars(tmp_path):
    base = tmp_path / "stanford_cars"
    (base / "devkit").mkdir(parents=True)
    names = np.array(["AM General Hummer SUV 2000", "Acura RL Sedan 2012", "Audi TT 2011"], dtype=object)
    scipy.io.savemat(base / "devkit" / "cars_meta.mat", {"class_names": names.reshape(1, -1)})
    scipy.io.savemat(base / "devkit" / "cars_train_annos.mat", _annos([("00001.jpg", 3), ("00002.jpg", 1)]))
    scipy.io.savemat(base / "cars_test_annos_withlabels.mat", _annos([("00001.jpg", 2)]))
    for f in ("00001.jpg", "00002.jpg"):
        img(base / "cars_train" / f)
    img(base / "cars_test" / "00001.jpg")
    tr = open_images("stanford-cars", "train", root=tmp_path)
    assert tr.classes == list(names) and tr.targets.tolist() == [2, 0]
    assert rel(tr, base) == ["cars_train/00001.jpg", "cars_train/00002.jpg"]
    te = read_stanford_cars(base, "test")
    assert te.targets.tolist() == [1] and rel(te, base) == ["cars_test/00001.jpg"]
    scipy.io.savemat(base / "cars_test_annos_withlabels.mat", _annos([("00001.jpg", 4)]))
    with pytest.raises(CorruptDatasetError, match=r"classes outside 1\.\.3"):
        read_stanford_cars(base, "test")
    scipy.io.savemat(base / "cars_test_annos_withlabels.mat", _annos([("00009.jpg", 1)]))
    with pytest.raises(CorruptDatasetError, match=r"1 image.*not on disk.*00009"):
        read_stanford_cars(base, "test")


# ------------------------------------------------------------------------------------------ DTD
def test_dtd_partitions(tmp_path):
    base = tmp_path / "dtd" / "dtd"
    for cls in ("banded", "zigzagged", "blotchy"):
        for n in range(2):
            img(base / "images" / cls / f"{cls}_{n}.jpg")
    (base / "labels").mkdir()
    (base / "labels" / "train1.txt").write_text("zigzagged/zigzagged_1.jpg\nbanded/banded_0.jpg\n")
    (base / "labels" / "test3.txt").write_text("blotchy/blotchy_1.jpg\n")
    ds = open_images("dtd", "train", root=tmp_path)
    assert ds.classes == ["banded", "blotchy", "zigzagged"] and ds.targets.tolist() == [2, 0]
    assert read_dtd(base, "test", partition=3).targets.tolist() == [1]
    with pytest.raises(DatasetNotFoundError, match=r"val1\.txt"):
        read_dtd(base, "val")
    with pytest.raises(ValueError, match="partition"):
        read_dtd(base, "test", partition=11)


# ------------------------------------------------------------------------------------------ Food-101
def test_food101(tmp_path):
    base = tmp_path / "food-101"
    (base / "meta").mkdir(parents=True)
    (base / "meta" / "classes.txt").write_text("apple_pie\nbaby_back_ribs\nwaffles\n")
    (base / "meta" / "train.txt").write_text("waffles/1001\napple_pie/1005649\n")
    (base / "meta" / "test.txt").write_text("baby_back_ribs/2\n")
    for entry in ("waffles/1001", "apple_pie/1005649", "baby_back_ribs/2"):
        img(base / "images" / f"{entry}.jpg")
    ds = open_images("food101", "train", root=tmp_path)
    assert ds.targets.tolist() == [2, 0] and rel(ds, base) == [
        "images/waffles/1001.jpg",
        "images/apple_pie/1005649.jpg",
    ]
    assert read_food101(base, "test").targets.tolist() == [1]
    (base / "meta" / "test.txt").write_text("pizza/3\n")
    with pytest.raises(CorruptDatasetError, match="line 1"):
        read_food101(base, "test")


# ------------------------------------------------------------------------------------------ Caltech-101
def test_caltech101_seeded_split_rule(tmp_path):
    cats = tmp_path / "caltech101" / "101_ObjectCategories"
    sizes = {"Faces": 5, "accordion": 4, "ant": 6, "BACKGROUND_Google": 3}
    for cls, n in sizes.items():
        for i in range(1, n + 1):
            img(cats / cls / f"image_{i:04d}.jpg")
    tr = open_images("caltech101", "train", root=tmp_path, train_per_class=2)
    te = read_caltech101(cats.parent, "test", train_per_class=2)
    assert tr.classes == ["Faces", "accordion", "ant"]  # BACKGROUND_Google is not a class
    assert tr.class_counts.tolist() == [2, 2, 2] and te.class_counts.tolist() == [3, 2, 4]
    train_files, test_files = set(rel(tr, cats)), set(rel(te, cats))
    assert not train_files & test_files
    assert train_files | test_files == {
        f"{c}/image_{i:04d}.jpg" for c, n in sizes.items() if c[0] != "B" for i in range(1, n + 1)
    }
    # the rule: per class, the sorted files permuted by default_rng([split_seed, k]); the first 2 are train
    files = sorted(f"ant/image_{i:04d}.jpg" for i in range(1, 7))
    order = np.random.default_rng([0, 2]).permutation(6)
    assert {files[i] for i in order[:2]} == {f for f in train_files if f.startswith("ant/")}
    other = read_caltech101(cats.parent, "train", train_per_class=2, split_seed=1)
    assert set(rel(other, cats)) != train_files
    assert set(rel(read_caltech101(cats.parent, "train", train_per_class=2), cats)) == train_files
    with pytest.raises(CorruptDatasetError, match="leaves none for testing"):
        read_caltech101(cats.parent, "train", train_per_class=4)


# ------------------------------------------------------------------------------------------ SUN397
def test_sun397_partitions(tmp_path):
    base = tmp_path / "SUN397"
    base.mkdir()
    (base / "ClassName.txt").write_text("/a/abbey\n/b/bakery/shop\n/z/zoo\n")
    files = ["/a/abbey/sun_aaa.jpg", "/b/bakery/shop/sun_bbb.jpg", "/z/zoo/sun_ccc.jpg", "/a/abbey/sun_ddd.jpg"]
    for f in files:
        img(base / f.lstrip("/"))
    (tmp_path / "Partitions").mkdir()  # Partitions.zip extracted beside SUN397/
    (tmp_path / "Partitions" / "Training_01.txt").write_text("\n".join(files[:3]) + "\n")
    (tmp_path / "Partitions" / "Testing_01.txt").write_text(files[3] + "\n")
    ds = open_images("sun397", "train", root=tmp_path)
    assert ds.classes == ["abbey", "bakery/shop", "zoo"] and ds.targets.tolist() == [0, 1, 2]
    assert rel(ds, base) == [f.lstrip("/") for f in files[:3]]
    assert read_sun397(base, "test").targets.tolist() == [0]
    with pytest.raises(DatasetNotFoundError, match=r"Training_02\.txt"):
        read_sun397(base, "train", partition=2)
    (tmp_path / "Partitions" / "Testing_01.txt").write_text("/q/quarry/sun_x.jpg\n")
    with pytest.raises(CorruptDatasetError, match="line 1"):
        read_sun397(base, "test")
